"""CACascade R-CNN end to end through the command-line tools: the narrow demo cascade (class-aware regression in
every stage) trains with ClassAwareSampler and Gaussian soft-NMS, evaluates, exports with plain NMS in the graph
(soft-NMS in the graph is refused with one message) and the export predicts through oars-infer."""

from __future__ import annotations

import json
import os

import pytest
from demo_utils import ROOT, det_demo_overrides
from demo_utils import run_tool as _tool

pytestmark = pytest.mark.slow

CFG = os.path.join(ROOT, "configs/detection/cacascade_rcnn/cacascade_rcnn_r18_fpn_demo_shapes.yaml")
SOFT_NMS = "model.test_cfg.rcnn.nms={type: soft_nms, method: gaussian, sigma: 0.5, iou_threshold: 0.0, min_score: 0.05}"


@pytest.fixture(scope="module")
def trained(demo_data, tmp_path_factory):
    work = tmp_path_factory.mktemp("cacascade")
    opts = det_demo_overrides(demo_data, epochs=2, **{
        "param_scheduler.1.T_max": 2,
        "model.backbone.base_channels": 8,
        "model.neck.out_channels": 32,
        "model.roi_head.bbox_roi_extractor.out_channels": 32,
        "train_dataloader.sampler": "{_delete_: true, type: ClassAwareSampler, mode: paddle}",
    })
    for i in range(3):
        opts.append(f"model.roi_head.bbox_head.{i}.fc_out_channels=64")
    out = _tool("train.py", "-c", CFG, "--work-dir", str(work), "-o", *opts)
    assert "coco/bbox_mAP" in out.stdout + out.stderr
    return work, (work / "last_checkpoint").read_text().strip(), opts


def test_eval_with_soft_nms_and_export(trained, demo_data, tmp_path):
    work, ckpt, opts = trained
    _tool("eval.py", "-c", CFG, "-w", ckpt, "--work-dir", str(tmp_path / "eval"), "-o", *opts, SOFT_NMS)
    metrics = json.loads((tmp_path / "eval" / "metrics.json").read_text())["metrics"]
    assert 0.0 <= metrics["coco/bbox_mAP"] <= 1.0
    refused = _tool("export.py", "-c", CFG, "-w", ckpt, "-o", str(tmp_path / "soft"), *opts, SOFT_NMS, check=False)
    assert refused.returncode == 2 and "soft_nms cannot be exported" in refused.stderr
    assert "Traceback" not in refused.stderr and not (tmp_path / "soft").exists()
    export = tmp_path / "export"
    _tool("export.py", "-c", CFG, "-w", ckpt, "-o", str(export), *opts)
    assert (export / "model.onnx").is_file() and (export / "deploy.yaml").is_file()
    infer = _tool("../deploy/python/infer.py", "--model-dir", str(export), "-i",
                  os.path.join(demo_data, "images", "val"), "-o", str(tmp_path / "deploy_infer"))
    assert infer.returncode == 0 and (tmp_path / "deploy_infer" / "results.jsonl").is_file()
