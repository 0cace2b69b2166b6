"""Temporal action localisation end to end through the command-line tools: tiny generated long videos ->
tools/extract_features.py with a random-weight shrunk demo TSM -> tools/train.py BMN (shrunk, 2 iterations) ->
tools/eval.py --show-dir --report (timelines with frames, the report with the random baseline, metrics.json) ->
tools/export.py (the BMN with its recognizer in one folder) -> oars-infer on a video file (segment records and the
timeline picture)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from demo_utils import ROOT, random_checkpoint, run_tool
from metric_units import assert_one_unit

pytestmark = pytest.mark.slow

TSM_CFG = os.path.join(ROOT, "configs/video/tsm/tsm_r18_demo_videos.yaml")
BMN_CFG = os.path.join(ROOT, "configs/video/bmn/bmn_demo_long_videos.yaml")
TSM_OPTS = ["model.backbone.base_channels=8"]  # 64-d pooled features
TSCALE = 8
INFER = os.path.join(ROOT, "deploy/python/infer.py")


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
    tsm = tmp_path_factory.mktemp("tsm")
    ckpt = random_checkpoint(TSM_CFG, TSM_OPTS, tsm)
    from oars.config import load_config

    load_config(TSM_CFG, TSM_OPTS).dump(str(tsm / "tsm.yaml"))  # --recognizer-config: the shrunk TSM as a file
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
    return data, work, (work / "last_checkpoint").read_text().strip(), opts, (str(tsm / "tsm.yaml"), ckpt)


def test_eval_draws_timelines_and_reports_against_the_baseline(trained, tmp_path):
    data, work, ckpt, opts, _ = trained
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
        assert all(0.0 <= v <= 1.0 for v in numbers[side].values())  # AUC too: every metric a fraction
    assert abs(numbers["model"]["AR@100"] - metrics["localization/AR@100"]) < 1e-6  # same computation
    assert abs(numbers["model"]["AUC"] - metrics["localization/AUC"]) < 1e-6
    for key in ("localization/AUC", "localization/AR@100"):  # one unit in metrics.json, report and log
        assert_one_unit(work, out.stdout + out.stderr, key)


def test_export_then_the_runtime_turns_a_video_file_into_segments(trained, tmp_path):
    """The last two steps a user runs: one export folder (localiser + recognizer), then oars-infer on a video file."""
    data, work, ckpt, opts, (rcfg, rweights) = trained
    export = tmp_path / "export"
    flags = ["-c", BMN_CFG, "-w", ckpt, "--recognizer-config", rcfg, "--recognizer-weights", rweights,
             "-o", str(export), *opts]
    run_tool("export.py", *flags)
    assert {"model.onnx", "recognizer.onnx", "deploy.yaml"} <= {p.name for p in export.iterdir()}
    again = run_tool("export.py", *flags, check=False)  # exports never replace exports
    assert again.returncode != 0 and "--overwrite" in again.stdout + again.stderr
    video = data / "videos" / "val_00000.mp4"
    out = tmp_path / "deploy_infer"
    proc = subprocess.run([sys.executable, INFER, "--model-dir", str(export), "-i", str(video), "-o", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    duration = json.loads((data / "annotations.json").read_text())["database"]["val_00000"]["duration_second"]
    assert len(records) == 1 and records[0]["segments"]
    for seg in records[0]["segments"]:
        assert 0.0 <= seg["start"] < seg["end"] <= duration + 1e-6 and 0.0 <= seg["score"] <= 1.0
    assert (out / "val_00000_timeline.png").exists()
