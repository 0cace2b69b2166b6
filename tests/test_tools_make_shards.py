"""tools/make_shards.py as a user runs it (relative paths, an existing output folder, bad flags), and training and
evaluation from its shards through tools/train.py and tools/eval.py (ShardDataset + ShardSamplerHook)."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil

import pytest
import torch
from demo_utils import DEMO_CFG, demo_overrides, run_tool, shard_config

from oars.config.check import load_checked_config
from oars.data.shards.writer import make_shards, parse_size
from oars.engine.checkpoint import load_checkpoint_file
from oars.errors import OarsError


def _make(data: str, out: str, *extra: str, cwd: str, check: bool = True):
    return run_tool("make_shards.py", "-c", DEMO_CFG, "--split", "val", "--out", out, "--shard-size", "82kB",
                    *extra, "-o", *demo_overrides(data), check=check, cwd=cwd)


def _error(proc) -> str:
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0][len("error: "):]


def test_make_shards_writes_shards_and_an_index(demo_data, tmp_path):
    proc = _make(demo_data, "shards/val", cwd=str(tmp_path))  # a relative --out, from the user's folder
    assert "wrote 8 samples in" in proc.stdout and "shards/val" in proc.stdout
    index = json.loads((tmp_path / "shards/val/index.json").read_text())
    names = sorted(os.listdir(tmp_path / "shards/val"))
    assert names == sorted(["index.json", *(s["name"] for s in index["shards"])])
    assert names[1] == "val-000000.tar" and len(index["shards"]) > 1
    assert all(s["bytes"] == os.path.getsize(tmp_path / "shards/val" / s["name"]) <= 82_000 for s in index["shards"])
    assert index["total"] == 8 and index["split"] == "val" and index["dataset_type"] == "SegDataset"
    assert index["scope"] == "segmentation"
    assert index["metainfo"]["classes"] == {"__tuple__": ["background", "circle", "square", "triangle"]}
    # the same input makes the same bytes (no time, owner or mode of the machine in the members)
    cfg = load_checked_config(DEMO_CFG, demo_overrides(demo_data))
    make_shards(cfg, "val", str(tmp_path / "again"), parse_size("82kB"), progress=False)
    for shard in index["shards"]:
        again, first = tmp_path / "again" / shard["name"], tmp_path / "shards/val" / shard["name"]
        assert again.read_bytes() == first.read_bytes()


def test_an_existing_output_needs_overwrite(demo_data, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    err = _error(_make(demo_data, "out", cwd=str(tmp_path), check=False))
    assert err == (f"--out {out}: the folder is not empty (1 file(s): notes.txt); pass --overwrite to replace its "
                   "shards, or choose another folder")
    assert os.listdir(out) == ["notes.txt"]
    cfg = load_checked_config(DEMO_CFG, demo_overrides(demo_data))
    make_shards(cfg, "val", str(out), 10**6, overwrite=True, progress=False)  # one big shard
    make_shards(cfg, "val", str(out), parse_size("41kB"), overwrite=True, progress=False)  # 8 shards
    make_shards(cfg, "val", str(out), 10**6, overwrite=True, progress=False)  # back to one: the 7 others go
    assert sorted(os.listdir(out)) == ["index.json", "notes.txt", "val-000000.tar"]
    assert (out / "notes.txt").read_text() == "mine"


def test_a_run_that_fails_while_writing_leaves_no_index(demo_data, tmp_path, monkeypatch):
    from oars.data import storage

    cfg = load_checked_config(DEMO_CFG, demo_overrides(demo_data))
    make_shards(cfg, "val", str(tmp_path / "out"), parse_size("41kB"), progress=False)
    read = storage.read_bytes
    calls = []

    def failing(path, *args, **kwargs):  # the storage fails at the 6th sample (a lost connection)
        calls.append(path)
        if len(calls) == 11:
            raise OSError(f"{path}: connection reset")
        return read(path, *args, **kwargs)

    monkeypatch.setattr(storage, "read_bytes", failing)
    with pytest.raises(OSError, match="connection reset"):
        make_shards(cfg, "val", str(tmp_path / "out"), parse_size("41kB"), overwrite=True, progress=False)
    assert len(calls) == 11
    assert os.listdir(tmp_path / "out") == []  # neither the old index and shards nor the new ones


def test_a_bad_shard_size_names_the_flag(demo_data, tmp_path):
    proc = run_tool("make_shards.py", "-c", DEMO_CFG, "--split", "val", "--out", "o", "--shard-size=1XB",
                    "-o", *demo_overrides(demo_data), check=False, cwd=str(tmp_path))
    assert _error(proc) == ("--shard-size '1XB': expected a positive size such as 1GB, 500MB or 64MiB (units: "
                            "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("size", ["-5MB", "0", "big", "0.1B", "1 XB"])
def test_shard_sizes_that_are_refused(size):
    with pytest.raises(OarsError, match=rf"^--shard-size {re.escape(repr(size))}: expected a positive size"):
        parse_size(size)


@pytest.mark.parametrize("size, expected", [("1GB", 10**9), ("500MB", 5 * 10**8), ("64MiB", 64 * 2**20),
                                            ("1000", 1000), ("1.5 kb", 1500)])
def test_shard_sizes_that_are_accepted(size, expected):
    assert parse_size(size) == expected


def test_a_missing_file_is_named_and_nothing_is_written(demo_data, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(demo_data, data)
    labels = sorted(glob.glob(str(data / "labels/val/*.png")))
    os.remove(labels[-1])  # the last sample's label map is gone: found only when that sample is written
    proc = _make(str(data), "out", cwd=str(tmp_path), check=False)
    err = _error(proc)
    assert os.path.basename(labels[-1]) in err
    assert not (tmp_path / "out").exists() or os.listdir(tmp_path / "out") == []


def _shard_config(data: str, shards: dict, work, storage_options: dict | None = None, **extra) -> str:
    """The demo config with its train/val datasets read from ``shards`` (split -> folder or URL)."""
    return shard_config(DEMO_CFG, demo_overrides(data, **extra), shards, work, storage_options)


def _metrics(work) -> dict:
    return json.loads((work / "metrics.json").read_text())["metrics"]


def _losses(work) -> list[dict]:
    path = sorted(glob.glob(str(work / "*" / "vis_data" / "scalars.json")))[-1]  # the last run (a resume's)
    rows = [json.loads(line) for line in open(path) if line.strip()]
    return [{k: v for k, v in r.items() if k in ("loss", "epoch", "iter", "mIoU")} for r in rows]


@pytest.mark.slow
def test_training_from_shards_resumes_exactly_and_evaluates_like_the_source(demo_data, tmp_path):
    from training_hooks import CrashAt

    from oars.engine.entry import load, train
    from oars.engine.runner import build_runner, prepare_config

    for split in ("train", "val"):
        run_tool("make_shards.py", "-c", DEMO_CFG, "--split", split, "--out", str(tmp_path / split),
                 "--shard-size", "82kB", "-o", *demo_overrides(demo_data))
    shards = {"train": str(tmp_path / "train"), "val": str(tmp_path / "val"), "test": str(tmp_path / "val")}
    extra = {"randomness.seed": 3, "randomness.deterministic": True, "train_dataloader.num_workers": 2}
    config = _shard_config(demo_data, shards, tmp_path, epochs=3, **extra)
    train(config, [], work_dir=str(tmp_path / "whole"))
    runner = build_runner(prepare_config(load(config, []), work_dir=str(tmp_path / "cut")))
    runner.register_hook(CrashAt(at_iter=10), priority="VERY_HIGH")  # 4 iterations per epoch: killed in epoch 3
    with pytest.raises(KeyboardInterrupt):
        runner.train()
    assert not (tmp_path / "cut" / "epoch_3.pth").exists()
    train(config, [], work_dir=str(tmp_path / "cut"), resume=True)

    whole = [r["loss"] for r in _losses(tmp_path / "whole") if "loss" in r]
    assert len(whole) == 3 * 4  # 16 samples in batches of 4 per epoch
    assert whole[:4] != pytest.approx(whole[4:8], rel=1e-3)
    # epoch 3 again after the kill: the same samples in the same order, so the same weights bit for bit
    ref = load_checkpoint_file(str(tmp_path / "whole" / "epoch_3.pth"))
    got = load_checkpoint_file(str(tmp_path / "cut" / "epoch_3.pth"))
    for key in ("state_dict", "ema_state_dict"):
        assert ref[key].keys() == got[key].keys() and all(torch.equal(ref[key][k], got[key][k]) for k in ref[key])
    ckpt = str(tmp_path / "whole" / "epoch_3.pth")
    run_tool("eval.py", "-c", config, "-w", ckpt, "--work-dir", str(tmp_path / "eval_shards"))
    run_tool("eval.py", "-c", DEMO_CFG, "-w", ckpt, "--work-dir", str(tmp_path / "eval_source"), "-o",
             *demo_overrides(demo_data, **extra))
    assert _metrics(tmp_path / "eval_shards") == _metrics(tmp_path / "eval_source")
    assert "mIoU" in _metrics(tmp_path / "eval_shards")


@pytest.mark.slow
def test_training_from_shards_on_s3_evaluates_like_the_local_run(s3_server, demo_data, tmp_path):
    options = s3_server.storage_options
    base = f"s3://{s3_server.bucket}/shard-run"
    for split in ("train", "val"):
        run_tool("make_shards.py", "-c", DEMO_CFG, "--split", split, "--out", f"{base}/{split}", "--shard-size",
                 "82kB", "--storage-options", json.dumps(options), "-o", *demo_overrides(demo_data))
    shards = {"train": f"{base}/train", "val": f"{base}/val", "test": f"{base}/val"}
    extra = {"train_dataloader.num_workers": 2, "val_dataloader.num_workers": 2, "test_dataloader.num_workers": 2}
    config = _shard_config(demo_data, shards, tmp_path, storage_options=options, **extra)
    run_tool("train.py", "-c", config, "--work-dir", str(tmp_path / "s3"))
    assert [r for r in _losses(tmp_path / "s3") if "loss" in r]
    ckpt = (tmp_path / "s3" / "last_checkpoint").read_text().strip()
    run_tool("eval.py", "-c", config, "-w", ckpt, "--work-dir", str(tmp_path / "eval_shards"))
    run_tool("eval.py", "-c", DEMO_CFG, "-w", ckpt, "--work-dir", str(tmp_path / "eval_local"), "-o",
             *demo_overrides(demo_data))
    assert "mIoU" in _metrics(tmp_path / "eval_shards")
    assert _metrics(tmp_path / "eval_shards") == _metrics(tmp_path / "eval_local")
    written = (tmp_path / "s3" / "config.yaml").read_text()
    assert base in written
    assert "ShardSamplerHook" in written and "streams ShardDataset shards" in written  # added by the engine, recorded
