"""ShardDataset (oars/data/shards): samples read back from WebDataset shards equal the source dataset's after the
pipeline (segmentation and detection demo shapes), ranks x workers cover every sample exactly once, epochs reshuffle
reproducibly, a resume continues with the same samples in the same order, and each broken input is one message."""

from __future__ import annotations

import itertools
import json
import os
import types

import numpy as np
import pytest
import torch
from demo_utils import DEMO_CFG, DET_DEMO_CFG, demo_overrides, det_demo_overrides, run_tool
from mmengine.registry import DefaultScope

import oars.data.shards.dataset as shard_dataset
from oars.config.check import load_checked_config
from oars.data.shards import ShardDataset
from oars.data.shards.writer import build_split_dataset, make_shards
from oars.errors import DataError, DataFileNotFoundError

SAMPLE_BYTES = 41_000  # one demo sample (128 px PNG image + label map + record) is a 40 kB tar: shards of 1 or 2


def _cfg(config: str, data: str):
    overrides = demo_overrides(data) if config == DEMO_CFG else det_demo_overrides(data)
    return load_checked_config(config, overrides)


@pytest.fixture(scope="module")
def seg_shards(demo_data, tmp_path_factory):
    """The demo shapes' train (16 samples, 2 per shard) and val (8, 1 per shard) splits as shards."""
    cfg = _cfg(DEMO_CFG, demo_data)
    out = tmp_path_factory.mktemp("seg_shards")
    make_shards(cfg, "train", str(out / "train"), 2 * SAMPLE_BYTES, progress=False)
    make_shards(cfg, "val", str(out / "val"), SAMPLE_BYTES, progress=False)
    return cfg, out


def _dataset(root, scope="segmentation", **kwargs) -> ShardDataset:
    with DefaultScope.overwrite_default_scope(scope):
        return ShardDataset(str(root), **kwargs)


def _key(sample: dict) -> str:
    path = sample["img_path"] if "img_path" in sample else sample["data_samples"].metainfo["img_path"]
    return os.path.basename(path).split(".")[0]


def _slot_keys(ds: ShardDataset, worker: int, workers: int, monkeypatch, limit: int | None = None) -> list[str]:
    """What DataLoader worker ``worker`` of ``workers`` yields (get_worker_info simulated in-process), the first
    ``limit`` samples of an endless stream."""
    info = types.SimpleNamespace(id=worker, num_workers=workers)
    monkeypatch.setattr(shard_dataset, "get_worker_info", lambda: info)
    keys = [_key(s) for s in itertools.islice(ds, limit)]
    monkeypatch.setattr(shard_dataset, "get_worker_info", lambda: None)
    return keys


def _rank_batches(ds: ShardDataset, workers: int, batch: int, monkeypatch, limit: int | None = None
                  ) -> list[list[str]]:
    """The batches a rank's DataLoader yields: each worker batches its own stream, taken in turn."""
    per_worker = []
    for w in range(workers):
        keys = _slot_keys(ds, w, workers, monkeypatch, limit)
        per_worker.append([keys[i:i + batch] for i in range(0, len(keys), batch)])
    out = []
    for i in range(max(len(b) for b in per_worker)):
        out += [b[i] for b in per_worker if i < len(b)]
    return out


def _assert_samples_equal(a: dict, b: dict) -> None:
    assert torch.equal(a["inputs"], b["inputs"])
    for name in ("gt_sem_seg", "gt_instances"):
        if name in a["data_samples"]:
            x, y = a["data_samples"].get(name), b["data_samples"].get(name)
            for field in x.keys():
                assert torch.equal(torch.as_tensor(x.get(field)), torch.as_tensor(y.get(field))), field


def test_segmentation_samples_read_back_equal_the_source(seg_shards):
    cfg, out = seg_shards
    pipeline = cfg.val_dataloader.dataset.pipeline
    source = build_split_dataset(cfg, "val")
    ds = _dataset(out / "val", pipeline=pipeline, test_mode=True)
    samples = list(ds)
    assert len(samples) == len(ds) == len(source) == 8
    for i, sample in enumerate(samples):
        _assert_samples_equal(source[i], sample)
    assert ds.metainfo["classes"] == source.metainfo["classes"]
    bad = dict(samples[0]["inputs"].numpy().__array_interface__)  # the comparison can fail: another sample differs
    assert bad and not torch.equal(samples[0]["inputs"], samples[1]["inputs"])


def test_detection_samples_and_the_coco_annotations_travel(demo_data, tmp_path):
    cfg = _cfg(DET_DEMO_CFG, demo_data)
    make_shards(cfg, "val", str(tmp_path / "val"), 3 * SAMPLE_BYTES, progress=False)
    index = json.loads((tmp_path / "val" / "index.json").read_text())
    assert index["scope"] == "detection" and index["dataset_type"] == "CocoDataset"
    assert index["metainfo_files"] == {"ann_file": "val-meta.ann_file.json"}  # what the COCO metric reads
    source = build_split_dataset(cfg, "val")
    ds = _dataset(tmp_path / "val", scope="detection", pipeline=cfg.val_dataloader.dataset.pipeline, test_mode=True)
    samples = list(ds)
    assert len(samples) == len(source)
    for i, sample in enumerate(samples):
        _assert_samples_equal(source[i], sample)
    with open(ds.metainfo["ann_file"]) as f, open(source.metainfo["ann_file"]) as g:
        assert json.load(f) == json.load(g)


def test_a_dataloader_with_two_workers_reads_every_sample_once(seg_shards):
    _, out = seg_shards
    ds = _dataset(out / "val", test_mode=True)
    loader = torch.utils.data.DataLoader(ds, batch_size=3, num_workers=2, collate_fn=lambda b: b)
    keys = [_key(s) for batch in loader for s in batch]
    assert sorted(keys) == [f"{i:09d}" for i in range(8)]


@pytest.mark.parametrize("ranks, workers", [(2, 2), (1, 3), (4, 4)],
                         ids=["2x2-by-shard", "1x3-uneven", "4x4-by-sample"])
def test_ranks_times_workers_cover_every_sample_exactly_once(seg_shards, monkeypatch, ranks, workers):
    _, out = seg_shards
    seen = []
    lengths = set()
    for rank in range(ranks):
        ds = _dataset(out / "train", rank=rank, world_size=ranks, shuffle=True, shuffle_buffer=3, seed=5)
        ds.set_loader(workers, 2)
        rank_keys = [k for w in range(workers) for k in _slot_keys(ds, w, workers, monkeypatch)]
        assert len(rank_keys) == len(ds)
        lengths.add(len(rank_keys))
        seen += rank_keys
    assert len(lengths) == 1  # every rank runs the same number of iterations
    assert set(seen) == {f"{i:09d}" for i in range(16)}  # no loss
    if ranks * workers in (4, 16):  # 8 shards of 2 over 4 slots; 16 samples over 16 slots: nothing repeats
        assert len(seen) == 16
    else:  # 8 shards over 3 slots: the short slots repeat their own samples to the common length
        assert len(seen) > 16


def test_epochs_reshuffle_reproducibly(seg_shards, monkeypatch):
    _, out = seg_shards

    def order(epoch: int) -> list[str]:
        ds = _dataset(out / "train", seed=7, shuffle_buffer=4)
        ds.set_epoch(epoch)
        return _slot_keys(ds, 0, 1, monkeypatch)

    first, second = order(0), order(1)
    assert sorted(first) == sorted(second) == [f"{i:09d}" for i in range(16)]
    assert first != second
    assert order(1) == second  # a run that resumes at epoch 1 reads the same order
    ds = _dataset(out / "train", seed=8, shuffle_buffer=4)
    assert _slot_keys(ds, 0, 1, monkeypatch) != first  # the seed matters


@pytest.mark.parametrize("infinite", [False, True], ids=["epoch", "endless"])
def test_resume_mid_epoch_continues_with_the_same_samples(seg_shards, monkeypatch, infinite):
    _, out = seg_shards
    kwargs = dict(rank=1, world_size=2, seed=3, shuffle_buffer=3, infinite=infinite)
    whole = _dataset(out / "train", **kwargs)
    whole.set_loader(2, 2)
    limit = 3 * len(whole) // 2 if infinite else None  # endless: three epochs of each worker
    uninterrupted = _rank_batches(whole, 2, 2, monkeypatch, limit)
    for done in (1, 3, 9):
        resumed = _dataset(out / "train", **kwargs)
        resumed.set_loader(2, 2)
        resumed.skip(done * 2)  # what mmengine's fast-forward asks: batches done x batch size
        again = _rank_batches(resumed, 2, 2, monkeypatch, limit)
        if infinite:
            assert again[: len(uninterrupted) - done - 2] == uninterrupted[done: len(uninterrupted) - 2]
        elif done < len(uninterrupted):
            assert again == uninterrupted[done:]
    assert uninterrupted[1:] != uninterrupted[:-1]
    if infinite:  # the stream goes on into a reshuffled epoch (the rank reads other shards)
        keys = [k for b in uninterrupted for k in b]
        assert keys[: len(whole)] != keys[len(whole): 2 * len(whole)]


def test_a_truncated_shard_names_the_shard_and_the_member(seg_shards, tmp_path):
    _, out = seg_shards
    broken = tmp_path / "val"
    os.makedirs(broken)
    for name in os.listdir(out / "val"):
        data = (out / "val" / name).read_bytes()
        (broken / name).write_bytes(data[:3000] if name == "val-000002.tar" else data)
    ds = _dataset(broken, test_mode=True)
    with pytest.raises(DataError, match=r"val-000002\.tar: truncated or corrupt shard, at member "
                                        r"000000002\.\w+.*remake"):
        list(ds)


def test_shards_of_another_task_are_refused_by_name(seg_shards):
    _, out = seg_shards
    with pytest.raises(DataError, match=r"made from a 'segmentation' dataset \(SegDataset\); this config's "
                                        r"default_scope is 'detection'"):
        _dataset(out / "val", scope="detection")


def test_a_folder_without_index_is_refused(tmp_path):
    with pytest.raises(DataFileNotFoundError, match=r"index\.json: no shard index here .*tools/make_shards\.py"):
        _dataset(tmp_path)


def test_the_shards_are_plain_webdataset(seg_shards):
    wds = pytest.importorskip("webdataset")
    _, out = seg_shards
    urls = sorted(str(p) for p in (out / "val").glob("val-*.tar"))
    samples = list(wds.WebDataset(urls, shardshuffle=False))
    assert [s["__key__"] for s in samples] == [f"{i:09d}" for i in range(8)]
    assert {"json", "img_path.png", "seg_map_path.png"} <= set(samples[0])
    assert np.frombuffer(samples[0]["img_path.png"][:8], np.uint8).tolist()[:4] == [0x89, 0x50, 0x4E, 0x47]


def test_shards_at_a_url_read_back_like_local_ones(seg_shards, demo_data):
    pytest.importorskip("fsspec")
    cfg, out = seg_shards
    make_shards(cfg, "val", "memory://oars-test-shards/val", SAMPLE_BYTES, progress=False)
    remote = _dataset("memory://oars-test-shards/val", test_mode=True, pipeline=cfg.val_dataloader.dataset.pipeline)
    local = _dataset(out / "val", test_mode=True, pipeline=cfg.val_dataloader.dataset.pipeline)
    for a, b in zip(list(remote), list(local), strict=True):
        _assert_samples_equal(a, b)
    with pytest.raises(DataFileNotFoundError, match=r"^memory://oars-test-shards/nothing/index\.json: no shard index"):
        _dataset("memory://oars-test-shards/nothing")


@pytest.mark.slow
def test_shards_on_s3_read_back_like_local_ones(s3_server, seg_shards, demo_data):
    cfg, out = seg_shards
    url = f"s3://{s3_server.bucket}/shards/val"
    options = json.dumps(s3_server.storage_options)
    run_tool("make_shards.py", "-c", DEMO_CFG, "--split", "val", "--out", url, "--shard-size", "20kB",
             "--storage-options", options, "-o", *demo_overrides(demo_data))
    remote = _dataset(url, test_mode=True, storage_options=s3_server.storage_options,
                      pipeline=cfg.val_dataloader.dataset.pipeline)
    local = _dataset(out / "val", test_mode=True, pipeline=cfg.val_dataloader.dataset.pipeline)
    for a, b in zip(list(remote), list(local), strict=True):
        _assert_samples_equal(a, b)
    with pytest.raises(DataFileNotFoundError, match=rf"s3://{s3_server.bucket}/no-such-shards/index\.json"):
        _dataset(f"s3://{s3_server.bucket}/no-such-shards", storage_options=s3_server.storage_options)


def test_video_samples_read_back_equal_the_source(tmp_path):
    from video.demo_data import generate

    config = os.path.join(os.path.dirname(DEMO_CFG), "../../video/tsm/tsm_r18_demo_videos.yaml")
    data = tmp_path / "videos"
    generate(str(data), num_train=1, num_val=2, size=32, num_frames=8)
    cfg = load_checked_config(config, [f"{p}_dataloader.dataset.data_root={data}" for p in ("train", "val", "test")])
    make_shards(cfg, "val", str(tmp_path / "val"), 10**6, progress=False)
    index = json.loads((tmp_path / "val" / "index.json").read_text())
    assert index["scope"] == "video" and index["total"] == len(build_split_dataset(cfg, "val"))
    source = build_split_dataset(cfg, "val")
    ds = _dataset(tmp_path / "val", scope="video", pipeline=cfg.val_dataloader.dataset.pipeline, test_mode=True)
    samples = list(ds)
    assert len(samples) == len(source) >= 2
    for i, sample in enumerate(samples):  # the clip's frames decoded from the member (a scratch file for FFmpeg)
        assert torch.equal(source[i]["inputs"], sample["inputs"])
        assert source[i]["data_samples"].gt_label.tolist() == sample["data_samples"].gt_label.tolist()
    assert not torch.equal(samples[0]["inputs"], samples[1]["inputs"])
    assert os.listdir(shard_dataset._scratch_dir()) == []  # the scratch copies are gone


_RANK_SCRIPT = """
import json, sys
import torch.distributed as dist
import oars.data  # registers ShardDataset
from mmengine.registry import DefaultScope
from torch.utils.data import DataLoader
from oars.data.shards import ShardDataset

dist.init_process_group("gloo")
with DefaultScope.overwrite_default_scope("segmentation"):
    ds = ShardDataset(sys.argv[1], shuffle_buffer=3, seed=11)
ds.set_loader(2, 2)
loader = DataLoader(ds, batch_size=2, num_workers=2, collate_fn=lambda b: [s["img_path"] for s in b])
keys = [p.rsplit("/", 1)[1].split(".")[0] for batch in loader for p in batch]
with open(f"{sys.argv[2]}/rank{dist.get_rank()}.json", "w") as f:
    json.dump({"keys": keys, "len": len(ds), "batches": len(loader)}, f)
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_torchrun_two_ranks_of_two_workers_read_every_sample_once(seg_shards, tmp_path):
    import subprocess
    import sys

    _, out = seg_shards
    script = tmp_path / "ranks.py"
    script.write_text(_RANK_SCRIPT)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           str(script), str(out / "train"), str(tmp_path)],
                          capture_output=True, text=True, timeout=180,
                          env=dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo"))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    keys = ranks[0]["keys"] + ranks[1]["keys"]
    assert sorted(keys) == [f"{i:09d}" for i in range(16)]  # 8 shards over 4 slots: every sample exactly once
    assert ranks[0]["len"] == ranks[1]["len"] == len(ranks[0]["keys"]) == len(ranks[1]["keys"]) == 8
