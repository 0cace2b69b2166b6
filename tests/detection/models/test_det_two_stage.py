"""TwoStageDetector assembly: the parts a config names, channels passed down, num_classes checks, images without
any box, and the modes (the per-head behaviour is tested in test_det_rpn_head / test_det_roi_heads)."""

from __future__ import annotations

import copy
import os

import pytest
import torch
from config_checks_detection import _batch, shrink_model
from demo_utils import ROOT
from mmengine.registry import MODELS, DefaultScope
from mmengine.structures import InstanceData

from oars.config import load_config

MASK_CFG = os.path.join(ROOT, "configs/detection/mask_rcnn/mask_rcnn_r50_fpn_1x_coco.yaml")


def _build(overrides: dict | None = None):
    cfg = shrink_model(load_config(MASK_CFG).model)
    for key, value in (overrides or {}).items():
        node = cfg
        *parents, last = key.split(".")
        for p in parents:
            node = node[p]
        node[last] = value
    with DefaultScope.overwrite_default_scope("detection"):
        return MODELS.build(copy.deepcopy(cfg))


def test_channels_and_classes_are_passed_down():
    torch.manual_seed(0)
    model = _build({"num_classes": 5})
    assert model.roi_head.bbox_head.fc_cls.out_features == 6  # 5 classes + background
    assert model.roi_head.mask_head.conv_logits.out_channels == 5
    assert model.with_mask and model.with_neck


def test_a_head_num_classes_that_differs_is_refused():
    with pytest.raises(ValueError, match=r"roi_head.bbox_head.num_classes=81 differs from model.num_classes=80"):
        _build({"roi_head.bbox_head.num_classes": 81})


def test_images_without_boxes_train_without_nan():
    torch.manual_seed(0)
    model = _build({"num_classes": 3})
    batch = _batch(3)
    empty = batch["data_samples"][0]
    empty.gt_instances = InstanceData(bboxes=torch.zeros(0, 4), labels=torch.zeros(0, dtype=torch.long),
                                      masks=torch.zeros(0, 64, 64, dtype=torch.uint8))
    batch["data_samples"][1].gt_instances = copy.deepcopy(empty.gt_instances)
    model.train()
    data = model.data_preprocessor(batch, training=True)
    losses = model(**data, mode="loss")
    total = sum(v for k, v in losses.items() if "loss" in k)
    assert torch.isfinite(total)
    total.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    assert losses["loss_bbox"].item() == 0.0 and losses["loss_mask"].item() == 0.0


def test_predict_without_samples_and_loss_without_samples():
    model = _build({"num_classes": 3}).eval()
    with torch.no_grad():
        preds = model(torch.zeros(1, 3, 64, 64), mode="predict")
    assert preds[0].pred_instances.masks.shape[1:] == (64, 64)
    with pytest.raises(ValueError, match="needs data_samples"):
        model(torch.zeros(1, 3, 64, 64), None, mode="loss")
