"""tools/get_flops.py counts a soft-NMS detector (CACascade R-CNN ships with soft-NMS) on the graph of the same
shapes with hard NMS, while its export still refuses soft-NMS inside the graph (ONNX has no soft form)."""

from __future__ import annotations

import os.path as osp

import pytest

from oars.analysis.config_model import build_count_target
from oars.config import load_config
from oars.errors import OarsError

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))
CFG = osp.join(ROOT, "configs", "detection", "cacascade_rcnn", "cacascade_rcnn_r18_fpn_demo_shapes.yaml")
SOFT = {"type": "soft_nms", "method": "gaussian", "sigma": 0.5, "iou_threshold": 0.0, "min_score": 0.05}


def _soft_config():
    cfg = load_config(CFG)
    cfg.model.test_cfg.rcnn.nms = dict(SOFT)
    return cfg


def test_a_soft_nms_detector_is_counted_as_its_hard_nms_graph():
    soft = build_count_target(_soft_config(), (64, 64))
    assert soft.model.roi_head.test_cfg["nms"]["type"] == "nms"  # the counted model's own copy
    soft.module(*soft.inputs)


def test_its_export_still_refuses_soft_nms_in_the_graph(tmp_path):
    import torch

    from oars.pipelines.export import export_model
    from oars.registry import MODELS
    from oars.tasks import get_task

    cfg = _soft_config()
    get_task("detection").import_registries()
    from mmengine.registry import DefaultScope

    with DefaultScope.overwrite_default_scope("detection"):
        model = MODELS.build(cfg.model.to_dict())
    ckpt = str(tmp_path / "model.pth")
    torch.save({"state_dict": model.state_dict()}, ckpt)
    with pytest.raises(OarsError, match="soft_nms cannot be exported with the NMS inside the graph"):
        export_model(cfg, ckpt, str(tmp_path / "export"))
