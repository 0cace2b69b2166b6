"""Mask R-CNN end to end through the command-line tools: the (narrow) demo Mask R-CNN fits a handful of demo
images, then eval gives box and mask mAP with pictures and the HTML report, and infer draws the masks."""

from __future__ import annotations

import json
import os

import pytest
from demo_utils import MASK_DEMO_CFG, det_demo_overrides
from demo_utils import run_tool as _tool

pytestmark = pytest.mark.slow

EPOCHS = 16
# Without random augmentation: the test asks whether the model can fit these images.
PLAIN_PIPELINE = ("[{type: LoadImageFromFile}, {type: LoadAnnotations, with_mask: true}, {type: Resize, "
                  "scale: [128, 128], keep_ratio: false}, {type: PackDetInputs}]")


@pytest.fixture(scope="module")
def fitted(demo_data, tmp_path_factory):
    """Train on the 16 training images and evaluate on the same images."""
    work = tmp_path_factory.mktemp("mask_work")
    opts = det_demo_overrides(demo_data, epochs=EPOCHS, fit_train=True, **{
        "param_scheduler.1.T_max": EPOCHS,
        "optim_wrapper.optimizer.lr": 0.004,
        "model.backbone.base_channels": 8,
        "model.neck.out_channels": 32,
        "model.roi_head.bbox_roi_extractor.out_channels": 32,
        "model.roi_head.mask_roi_extractor.out_channels": 32,
        "model.roi_head.bbox_head.fc_out_channels": 128,
        "model.roi_head.mask_head.conv_out_channels": 16,
        "model.train_cfg.rcnn.sampler.num": 32,
        "train_dataloader.dataset.pipeline": PLAIN_PIPELINE,
        "default_hooks.logger.interval": 4,
    })
    out = _tool("train.py", "-c", MASK_DEMO_CFG, "--work-dir", str(work), "-o", *opts)
    log = out.stdout + out.stderr
    assert "loss_rpn_cls:" in log and "loss_mask:" in log and "coco/segm_mAP" in log
    return work, (work / "last_checkpoint").read_text().strip(), opts


def test_mask_rcnn_fits_training_images_and_eval_writes_report(fitted, tmp_path):
    work, ckpt, opts = fitted
    shows = tmp_path / "pictures"
    out = _tool("eval.py", "-c", MASK_DEMO_CFG, "-w", ckpt, "--work-dir", str(work), "--show-dir", str(shows),
                "--report", "-o", *opts)
    assert "report written to" in out.stdout
    metrics = json.loads((work / "metrics.json").read_text())["metrics"]
    assert metrics["coco/bbox_mAP_50"] > 0.15 and metrics["coco/segm_mAP_50"] > 0.15, metrics
    assert (shows / "summary.png").exists()
    html = (work / "report.html").read_text()
    assert "Worst images" in html and "segm" in html


def test_infer_draws_masks(fitted, demo_data, tmp_path):
    work, ckpt, opts = fitted
    out_dir = tmp_path / "infer"
    _tool("infer.py", "-c", MASK_DEMO_CFG, "-w", ckpt, "-i", os.path.join(demo_data, "images", "train"),
          "--draw-threshold", "0.3", "-o", str(out_dir), *opts)
    assert len(list(out_dir.glob("*_vis.png"))) == 16
    records = json.loads((out_dir / "detections.json").read_text())
    dets = [d for r in records for d in r["detections"]]
    assert dets and all(set(d["segmentation"]) == {"size", "counts"} for d in dets)  # COCO RLE per detection
    lines = [json.loads(line) for line in (out_dir / "results.jsonl").read_text().splitlines()]
    assert [r["predictor"] for r in lines] == ["instance_masks"] * 16  # results.jsonl: one record per image
    assert [(r["input"], r["detections"]) for r in lines] == [(r["image"], r["detections"]) for r in records]
