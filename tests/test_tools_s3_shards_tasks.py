"""YOLOv3 and TSM demo training through the tools from shards on the loopback S3 (and TSM from a plain ``s3://``
folder of videos), as tests/test_tools_make_shards.py does for U-Net: the run trains, and the evaluation over the
shards (or the bucket) equals the evaluation of the same checkpoint over the local source (slow: each trains a few
iterations of a shrunk model)."""

from __future__ import annotations

import json
import os

import pytest
from demo_utils import DET_DEMO_CFG, ROOT, det_demo_overrides, run_tool, shard_config

VIDEO_CFG = os.path.join(ROOT, "configs", "video", "tsm", "tsm_r18_demo_videos.yaml")
SPLITS = ("train", "val", "test")


def video_overrides(data_root: str, **extra) -> list[str]:
    """The TSM demo shrunk: 1 epoch, batches of 4, no workers, base width 8, one evaluation."""
    opts = {"model.backbone.base_channels": 8, "train_cfg.max_epochs": 1, "train_cfg.val_interval": 1,
            "default_hooks.logger.interval": 1, "default_hooks.checkpoint.interval": 1, "randomness.seed": 3}
    for split in SPLITS:
        opts.update({f"{split}_dataloader.dataset.data_root": data_root, f"{split}_dataloader.num_workers": 0,
                     f"{split}_dataloader.persistent_workers": False, f"{split}_dataloader.batch_size": 4})
    opts.update(extra)
    return [f"{k}={v}" for k, v in opts.items()]


def storage_overrides(endpoint: str) -> dict:
    return {f"{s}_dataloader.dataset.storage_options": f"{{endpoint_url: '{endpoint}'}}" for s in SPLITS}


def metrics(work) -> dict:
    return json.loads((work / "metrics.json").read_text())["metrics"]


def train_on_shards_and_compare(s3_server, config: str, overrides: list[str], tmp_path, prefix: str, metric: str):
    """Shards of train and val on the S3, a training from them, then the checkpoint evaluated over the shards and
    over the local source: the same metrics."""
    options = s3_server.storage_options
    base = f"s3://{s3_server.bucket}/{prefix}"
    for split in ("train", "val"):
        run_tool("make_shards.py", "-c", config, "--split", split, "--out", f"{base}/{split}", "--shard-size",
                 "100kB", "--storage-options", json.dumps(options), "-o", *overrides)
    shards = {"train": f"{base}/train", "val": f"{base}/val", "test": f"{base}/val"}
    cfg = shard_config(config, overrides, shards, tmp_path, options)
    run_tool("train.py", "-c", cfg, "--work-dir", str(tmp_path / "s3"))
    ckpt = (tmp_path / "s3" / "last_checkpoint").read_text().strip()
    run_tool("eval.py", "-c", cfg, "-w", ckpt, "--work-dir", str(tmp_path / "eval_shards"))
    run_tool("eval.py", "-c", config, "-w", ckpt, "--work-dir", str(tmp_path / "eval_local"), "-o", *overrides)
    got = metrics(tmp_path / "eval_shards")
    assert metric in got and got == metrics(tmp_path / "eval_local")
    assert "ShardSamplerHook" in (tmp_path / "s3" / "config.yaml").read_text()


@pytest.fixture(scope="module")
def demo_videos(tmp_path_factory) -> str:
    """8 training and 4 validation clips of the demo motion set (64 px, 16 frames)."""
    from video.demo_data import generate

    out = tmp_path_factory.mktemp("demo_videos")
    generate(str(out), num_train=8, num_val=4, size=64, num_frames=16)
    return str(out)


@pytest.mark.slow
def test_yolov3_from_shards_on_s3_evaluates_like_the_local_run(s3_server, demo_data, tmp_path):
    train_on_shards_and_compare(s3_server, DET_DEMO_CFG, det_demo_overrides(demo_data, **{"randomness.seed": 3}),
                                tmp_path, "yolo-shards", "coco/bbox_mAP")


@pytest.mark.slow
def test_tsm_from_shards_on_s3_evaluates_like_the_local_run(s3_server, demo_videos, tmp_path):
    train_on_shards_and_compare(s3_server, VIDEO_CFG, video_overrides(demo_videos), tmp_path, "tsm-shards",
                                "acc/top1")


@pytest.mark.slow
def test_tsm_from_s3_equals_the_local_run(s3_server, demo_videos, tmp_path):
    url = s3_server.upload(demo_videos, "videos")
    results = {}
    for name, opts in (("local", video_overrides(demo_videos)),
                       ("s3", video_overrides(url, **storage_overrides(s3_server.endpoint_url)))):
        work = tmp_path / name
        run_tool("train.py", "-c", VIDEO_CFG, "--work-dir", str(work), "-o", *opts)
        ckpt = (work / "last_checkpoint").read_text().strip()
        run_tool("eval.py", "-c", VIDEO_CFG, "-w", ckpt, "--work-dir", str(work / "eval"), "-o", *opts)
        rows = [json.loads(line) for line in open(next((work).glob("*/vis_data/scalars.json"))) if line.strip()]
        losses = [r["loss"] for r in rows if "loss" in r]
        results[name] = (losses, metrics(work / "eval"))
    assert results["s3"][0] and results["s3"][0] == results["local"][0]  # the same losses at every iteration
    assert "acc/top1" in results["s3"][1] and results["s3"][1] == results["local"][1]
    assert url in (tmp_path / "s3" / "config.yaml").read_text()
