"""End to end through the command-line tools: train -> eval (with pictures) -> infer, and clean errors."""

from __future__ import annotations

import json
import os

import numpy as np
from demo_utils import DEMO_CFG, demo_overrides
from demo_utils import run_tool as _tool
from metric_units import assert_one_unit
from PIL import Image


def test_train_eval_infer(demo_data, tmp_path):
    work = tmp_path / "work"
    opts = demo_overrides(demo_data, epochs=2)
    out = _tool("train.py", "-c", DEMO_CFG, "--work-dir", str(work), "-o", *opts)
    log = out.stdout + out.stderr
    assert "loss:" in log and "lr:" in log and "eta:" in log and "samples_per_s:" in log
    ckpt = (work / "last_checkpoint").read_text().strip()
    assert os.path.isfile(ckpt)

    # a checkpoint that does not fit the configured model is refused, not evaluated half-loaded
    bad = _tool("eval.py", "-c", DEMO_CFG, "-w", ckpt, "--work-dir", str(tmp_path / "bad"), "-o", *opts,
                "model.backbone.base_channels=8", check=False)
    assert bad.returncode == 2 and "does not fit" in bad.stderr and "Traceback" not in bad.stderr

    shows = tmp_path / "pictures"
    # MMDetection's positional CONFIG CHECKPOINT (the -c/-w form is used just above)
    out = _tool("eval.py", DEMO_CFG, ckpt, "--work-dir", str(work), "--show-dir", str(shows), "--report",
                "-o", *opts)
    assert "mIoU" in out.stdout
    metrics = json.loads((work / "metrics.json").read_text())["metrics"]
    for key in ("mIoU", "aAcc"):  # fractions 0-1, the same in metrics.json, report.html and the log
        assert_one_unit(work, out.stdout + out.stderr, key)
    assert 0.0 <= metrics["mIoU"] <= 1.0
    assert (shows / "summary.png").exists() and len(list(shows.glob("*.png"))) == 9  # 8 val images + grid

    infer_out = tmp_path / "infer"
    images = os.path.join(demo_data, "images", "val")
    _tool("infer.py", "-c", DEMO_CFG, "-w", ckpt, "-i", images, "-o", str(infer_out), *opts)
    labels = sorted(p for p in infer_out.glob("*.png") if not p.name.endswith("_vis.png"))
    assert len(labels) == 8 and len(list(infer_out.glob("*_vis.png"))) == 8
    label = np.array(Image.open(labels[0]))
    assert label.shape == (128, 128) and set(np.unique(label)) <= {0, 1, 2, 3}


def test_unknown_type_is_reported_without_traceback(tmp_path):
    proc = _tool("train.py", "-c", DEMO_CFG, "--work-dir", str(tmp_path), "-o", "model.backbone.type=UNett",
                 check=False)
    assert proc.returncode == 2
    assert "model.backbone.type" in proc.stderr and "UNet" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_missing_checkpoint_is_reported(tmp_path):
    proc = _tool("eval.py", "-c", DEMO_CFG, "-w", str(tmp_path / "none.pth"), check=False)
    assert proc.returncode == 2 and "none.pth" in proc.stderr and "Traceback" not in proc.stderr


def test_bad_config_value_is_reported(tmp_path):
    proc = _tool("train.py", "-c", DEMO_CFG, "--work-dir", str(tmp_path), "-o", "model.backbone.num_stages=1",
                 check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "num_stages" in proc.stderr


def test_missing_data_folder_is_reported(tmp_path):
    proc = _tool("train.py", "-c", DEMO_CFG, "--work-dir", str(tmp_path), "-o",
                 f"train_dataloader.dataset.data_root={tmp_path / 'nowhere'}", check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "image folder not found" in proc.stderr and "nowhere" in proc.stderr
