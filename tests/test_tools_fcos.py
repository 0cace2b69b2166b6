"""The one-stage demo detector (FCOS) end to end through the command-line tools, as `make demo-onestage` runs them:
train (it fits a handful of demo images), eval with pictures and the report, infer, export (decode + NMS in the
graph, ONNX Runtime self-check) and the deployed predictor, whose records agree with tools/infer.py's."""

from __future__ import annotations

import json
import os

import pytest
from demo_utils import ROOT, det_demo_overrides
from demo_utils import run_tool as _tool

pytestmark = pytest.mark.slow

CFG = os.path.join(ROOT, "configs/detection/fcos/fcos_r18_fpn_demo_shapes.yaml")
EPOCHS = 24
# Without random augmentation: the test asks whether the model can fit these images.
PLAIN_PIPELINE = ("[{type: LoadImageFromFile}, {type: LoadAnnotations, with_bbox: true}, {type: Resize, "
                  "scale: [128, 128], keep_ratio: false}, {type: PackDetInputs}]")


@pytest.fixture(scope="module")
def fitted(demo_data, tmp_path_factory):
    """Train on the 16 training images and evaluate on the same images."""
    work = tmp_path_factory.mktemp("fcos_work")
    opts = det_demo_overrides(demo_data, epochs=EPOCHS, fit_train=True, **{
        "param_scheduler.1.T_max": EPOCHS,
        "optim_wrapper.optimizer.lr": 0.004,
        "train_dataloader.dataset.pipeline": PLAIN_PIPELINE,
        "default_hooks.logger.interval": 8,
    })
    out = _tool("train.py", "-c", CFG, "--work-dir", str(work), "-o", *opts)
    log = out.stdout + out.stderr
    assert "loss_cls:" in log and "loss_centerness:" in log and "coco/bbox_mAP" in log
    return work, (work / "last_checkpoint").read_text().strip(), opts


def test_fcos_fits_training_images_eval_infer_export_predict(fitted, demo_data, tmp_path):
    work, ckpt, opts = fitted
    out = _tool("eval.py", "-c", CFG, "-w", ckpt, "--work-dir", str(work), "--show-dir", str(tmp_path / "pictures"),
                "--report", "-o", *opts)
    assert "report written to" in out.stdout
    metrics = json.loads((work / "metrics.json").read_text())["metrics"]
    assert metrics["coco/bbox_mAP_50"] > 0.3, metrics
    images = os.path.join(demo_data, "images", "train")
    _tool("infer.py", "-c", CFG, "-w", ckpt, "-i", images, "-o", str(tmp_path / "infer"), *opts)
    export = tmp_path / "export"
    out = _tool("export.py", "-c", CFG, "-w", ckpt, "-o", str(export), *opts)
    assert "self-check passed" in out.stdout
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, os.path.join(ROOT, "deploy/python/infer.py"), "--model-dir", str(export),
                           "-i", images, "-o", str(tmp_path / "deployed")], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    eager = [json.loads(line) for line in (tmp_path / "infer" / "results.jsonl").read_text().splitlines()]
    deployed = [json.loads(line) for line in (tmp_path / "deployed" / "results.jsonl").read_text().splitlines()]
    assert [r["predictor"] for r in deployed] == ["detection_boxes"] * 16
    # the graph and the eager model find the same confident detections (labels, boxes within 1 px)
    for a, b in zip(eager, deployed):
        strong_a = sorted((d["label"], d["bbox"]) for d in a["detections"] if d["score"] >= 0.3)
        strong_b = sorted((d["label"], d["bbox"]) for d in b["detections"] if d["score"] >= 0.3)
        assert [la for la, _ in strong_a] == [lb for lb, _ in strong_b]
        assert all(max(abs(x - y) for x, y in zip(ba, bb)) <= 1.0 for (_, ba), (_, bb) in zip(strong_a, strong_b))
