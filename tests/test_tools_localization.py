"""Temporal action localisation end to end through the command-line tools: tiny generated long videos ->
tools/extract_features.py with a random-weight shrunk demo TSM -> tools/train.py BMN (shrunk, 2 iterations) ->
tools/eval.py --show-dir --report (timelines with frames, the report with the random baseline, metrics.json)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from demo_utils import ROOT, random_checkpoint, run_tool

pytestmark = pytest.mark.slow

TSM_CFG = os.path.join(ROOT, "configs/video/tsm/tsm_r18_demo_videos.yaml")
BMN_CFG = os.path.join(ROOT, "configs/video/bmn/bmn_demo_long_videos.yaml")
TSM_OPTS = ["model.backbone.base_channels=8"]  # 64-d pooled features
TSCALE = 8


def _bmn_overrides(data_root: str) -> list[str]:
    opts = {"model.feat_dim": 64, "model.tscale": TSCALE, "model.dscale": 4, "model.num_sample": 4,
            "model.hidden_dim_1d": 8, "model.hidden_dim_2d": 8, "model.hidden_dim_3d": 8,
            "train_cfg.max_epochs": 1, "train_cfg.val_interval": 1, "default_hooks.checkpoint.interval": 1,
            "default_hooks.logger.interval": 1, "param_scheduler.0.end": 1}
    for split in ("train_dataloader", "val_dataloader", "test_dataloader"):
        opts.update({f"{split}.dataset.data_root": data_root, f"{split}.batch_size": 1,
                     f"{split}.dataset.pipeline.0.feat_dim": 64, f"{split}.dataset.pipeline.1.temporal_dim": TSCALE})
    return [f"{k}={v}" for k, v in opts.items()]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(data root, work dir, checkpoint, overrides): 2 training + 1 validation video of 4-5 s, features, BMN."""
    from video.demo_long_videos import generate

    data = tmp_path_factory.mktemp("demo_long_videos")
    res = generate(data, num_train=2, num_val=1, min_seconds=4, max_seconds=5)
    assert res["num_videos"] == {"train": 2, "val": 1} and res["num_actions"] >= 3
    ckpt = random_checkpoint(TSM_CFG, TSM_OPTS, tmp_path_factory.mktemp("tsm"))
    run_tool("extract_features.py", "-c", TSM_CFG, "-w", ckpt, "-i", str(data / "videos"), "--workers", "0",
             "-o", str(data / "features"), *TSM_OPTS)
    feats = np.load(data / "features" / "val_00000.npy")
    anno = json.loads((data / "annotations.json").read_text())["database"]
    assert feats.shape == (int(anno["val_00000"]["duration_second"]), 64)  # one 8-frame snippet per second
    work = tmp_path_factory.mktemp("bmn_work")
    opts = _bmn_overrides(str(data))
    out = run_tool("train.py", "-c", BMN_CFG, "--work-dir", str(work), "-o", *opts)
    log = out.stdout + out.stderr
    assert "loss_pem_reg" in log and "localization/AUC" in log
    return data, work, (work / "last_checkpoint").read_text().strip(), opts


def test_eval_draws_timelines_and_reports_against_the_baseline(trained, tmp_path):
    data, work, ckpt, opts = trained
    shows = tmp_path / "timelines"
    out = run_tool("eval.py", "-c", BMN_CFG, "-w", ckpt, "--work-dir", str(work), "--show-dir", str(shows),
                   "--report", "-o", *opts)
    assert "AR@100" in out.stdout and "(random " in out.stdout + out.stderr
    metrics = json.loads((work / "metrics.json").read_text())["metrics"]
    assert {"localization/AR@1", "localization/AR@100", "localization/AUC"} <= set(metrics)
    import cv2

    picture = cv2.imread(str(shows / "val_00000.png"))
    assert picture is not None and picture.shape[1] >= 1200 and (shows / "summary.png").exists()
    html = (work / "report.html").read_text()
    assert "random baseline" in html and "AR-AN" in html and "Worst videos" in html
    assert html.count("data:image/png;base64,") >= 2  # the AR-AN curves and the worst video's timeline
    numbers = json.loads((work / "localization_vs_baseline.json").read_text())
    assert numbers["videos"] == 1 and numbers["map_kind"] == "class-agnostic"
    for side in ("model", "random_baseline"):
        assert set(numbers[side]) == {"AR@1", "AR@5", "AR@10", "AR@100", "AUC", "mAP@0.5", "mAP"}
        assert all(0.0 <= v <= 100.0 for v in numbers[side].values())
    assert abs(numbers["model"]["AR@100"] - metrics["localization/AR@100"]) < 1e-6  # same computation
