"""Detection end to end through the command-line tools: a shrunk YOLOv3 fits a handful of demo images,
then eval (metrics, pictures, HTML report) and infer (pictures with boxes, detections.json)."""

from __future__ import annotations

import json
import os

import pytest
from demo_utils import DET_DEMO_CFG, det_demo_overrides
from demo_utils import run_tool as _tool
from metric_units import assert_one_unit

EPOCHS = 30
# The training pipeline without random augmentation: the test asks whether the model can fit these images.
PLAIN_PIPELINE = ("[{type: LoadImageFromFile}, {type: LoadAnnotations}, {type: Resize, scale: [128, 128], "
                  "keep_ratio: false}, {type: PackDetInputs}]")


@pytest.fixture(scope="module")
def fitted(demo_data, tmp_path_factory):
    """Train on the 16 training images and evaluate on the same images (can the model fit them?)."""
    work = tmp_path_factory.mktemp("det_work")
    opts = det_demo_overrides(demo_data, epochs=EPOCHS, fit_train=True, **{
        "param_scheduler.1.T_max": EPOCHS,
        "optim_wrapper.optimizer.lr": 0.01,
        "model.data_preprocessor.batch_augments": "null",
        "train_dataloader.dataset.pipeline": PLAIN_PIPELINE,
        "custom_hooks": "[]",  # no EMA: its average over ~100 steps would lag behind a short run
        "default_hooks.logger.interval": 4,
    })
    out = _tool("train.py", "-c", DET_DEMO_CFG, "--work-dir", str(work), "-o", *opts)
    log = out.stdout + out.stderr
    assert "loss_obj:" in log and "loss_cls:" in log and "coco/bbox_mAP" in log
    ckpt = (work / "last_checkpoint").read_text().strip()
    return work, ckpt, opts


def test_yolov3_fits_training_images_and_eval_writes_report(fitted, tmp_path):
    work, ckpt, opts = fitted
    shows = tmp_path / "pictures"
    out = _tool("eval.py", "-c", DET_DEMO_CFG, "-w", ckpt, "--work-dir", str(work), "--show-dir", str(shows),
                "--report", "-o", *opts)
    assert "Average Precision" in out.stdout + out.stderr and "report written to" in out.stdout
    result = json.loads((work / "metrics.json").read_text())
    assert result["metrics"]["coco/bbox_mAP_50"] > 0.3, result["metrics"]
    assert "CocoMetric per class" in result["details"]
    assert (shows / "summary.png").exists() and len(list(shows.glob("*.png"))) == 17  # 16 images + grid
    html = (work / "report.html").read_text()
    for section in ("Precision-recall curves", "Confusion matrix", "Worst images", "data:image/png;base64,"):
        assert section in html
    # one unit: metrics.json, report.html and the log agree, as fractions 0-1 (the per-class AP too)
    for key in ("coco/bbox_mAP", "coco/bbox_mAP_50"):
        assert_one_unit(work, out.stdout + out.stderr, key)
    assert "per class bbox results (all metrics are fractions 0–1)" in out.stdout + out.stderr


def test_infer_draws_boxes_and_writes_detections(fitted, demo_data, tmp_path):
    work, ckpt, opts = fitted
    out_dir = tmp_path / "infer"
    images = os.path.join(demo_data, "images", "train")
    _tool("infer.py", "-c", DET_DEMO_CFG, "-w", ckpt, "-i", images, "--draw-threshold", "0.2", "-o", str(out_dir),
          *opts)
    assert len(list(out_dir.glob("*_vis.png"))) == 16
    records = json.loads((out_dir / "detections.json").read_text())
    assert len(records) == 16 and any(r["detections"] for r in records)
    det = next(d for r in records for d in r["detections"])
    assert set(det) == {"bbox", "score", "label", "class"} and det["class"] in ("circle", "square", "triangle")


def test_class_count_mismatch_is_reported(demo_data, tmp_path):
    proc = _tool("train.py", "-c", DET_DEMO_CFG, "--work-dir", str(tmp_path), "-o",
                 *det_demo_overrides(demo_data), "model.num_classes=5", check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "3 classes" in proc.stderr and "model.num_classes is 5" in proc.stderr


def test_report_is_refused_for_a_scope_without_a_report_hook():
    """Every task registers an EvaluationReportHook; a scope without one gets a clear message, not a lookup error."""
    from mmengine.config import Config

    from oars.engine.entry import _require_hook
    from oars.errors import OarsError

    with pytest.raises(OarsError, match="--report is not available for default_scope 'oars'"):
        _require_hook(Config({"default_scope": "oars"}), "EvaluationReportHook", "--report")
