"""The CACascade R-CNN champion's detection parts: the GroupNorm FPN, the 4-conv + 1-fc GN box head, the Objects365
dataset config (class indices from the names, whatever order a file lists its categories in) and the champion
config (its full-size count by hand, and shrunk in loss / predict / tensor modes)."""

from __future__ import annotations

import copy
import json
import os
import random

import config_checks_detection
import cv2
import model_sizes
import numpy as np
import pytest
import torch
from demo_utils import ROOT
from mmengine.registry import MODELS, DefaultScope
from torch import nn

import detection.models  # noqa: F401  (registers everything)
from detection.datasets import CocoDataset
from detection.models.necks.fpn import FPN
from detection.models.roi_heads.convfc_bbox_head import Shared4Conv1FCBBoxHead
from oars.config import load_config
from oars.models.backbones import SENet
from oars.models.layers import ModulatedDeformConv2d

CHAMPION = "detection/cacascade_rcnn/cacascade_rcnn_se154_vd_dcnv2_fpn_gn_obj365.yaml"
OBJECTS365 = os.path.join(ROOT, "configs", "_base_", "datasets", "objects365v1.yaml")
GN = {"type": "GN", "num_groups": 4}


def test_gn_fpn_normalises_every_conv_and_default_has_none():
    torch.manual_seed(0)
    feats = [torch.randn(2, 8, 16, 16), torch.randn(2, 16, 8, 8)]
    fpn = FPN([8, 16], 16, num_outs=3, norm=GN).eval()
    for block in [*fpn.inner_blocks, *fpn.layer_blocks]:
        assert isinstance(block.norm, nn.GroupNorm) and block.norm.num_groups == 4 and block.conv.bias is None
        assert block.act is None  # mmdet / Paddle: a GN FPN conv has no activation
    outs = fpn(feats)
    assert [tuple(o.shape) for o in outs] == [(2, 16, 16, 16), (2, 16, 8, 8), (2, 16, 4, 4)]
    # the coarsest output by hand: GN(conv3x3(GN(conv1x1(C3))))
    lat = fpn.inner_blocks[1]
    smooth = fpn.layer_blocks[1]
    want = smooth.norm(smooth.conv(lat.norm(lat.conv(feats[1]))))
    torch.testing.assert_close(outs[1], want)

    plain = FPN([8, 16], 16, num_outs=3)
    assert all(b.norm is None and b.conv.bias is not None for b in [*plain.inner_blocks, *plain.layer_blocks])
    with pytest.raises(ValueError, match=r"GN with num_groups=32 cannot normalise 16 channels"):
        FPN([8, 16], 16, num_outs=3, norm={"type": "GN", "num_groups": 32})


def _head(**kw) -> Shared4Conv1FCBBoxHead:
    args = dict(num_classes=5, in_channels=16, roi_feat_size=7, conv_out_channels=16, fc_out_channels=32, norm=GN,
                bbox_coder={"type": "DeltaXYWHBBoxCoder", "target_means": [0] * 4, "target_stds": [0.1, 0.1, 0.2, 0.2]},
                loss_cls={"type": "CrossEntropyLoss", "use_sigmoid": False, "loss_weight": 1.0},
                loss_bbox={"type": "SmoothL1Loss", "beta": 1.0, "loss_weight": 1.0}, reg_class_agnostic=True)
    return Shared4Conv1FCBBoxHead(**{**args, **kw})


def test_4conv1fc_gn_box_head_layout_count_and_shapes():
    head = _head()
    assert len(head.shared_convs) == 4 and len(head.shared_fcs) == 1
    assert all(isinstance(c.norm, nn.GroupNorm) and c.conv.bias is None for c in head.shared_convs)
    # 4 x (conv(16, 16, 3) + GN 2*16) + fc(16*7*7, 32) + cls fc(32, 6) + class-agnostic reg fc(32, 4)
    assert sum(p.numel() for p in head.parameters()) == 4 * (16 * 16 * 9 + 32) + (784 * 32 + 32) + 198 + 132
    cls, reg = head(torch.randn(3, 16, 7, 7))
    assert cls.shape == (3, 6) and reg.shape == (3, 4)
    plain = _head(norm=None)  # no norm: the convs keep their bias
    assert all(c.norm is None and c.conv.bias is not None for c in plain.shared_convs)


def test_objects365_classes_follow_the_list_not_the_file_order(tmp_path):
    """The 365 names are matched by name: a file listing its categories in another order (with other ids) gives
    the same class indices; a file without one of the names is refused naming it."""
    cfg = load_config(OBJECTS365)
    classes = list(cfg.train_dataloader.dataset.classes)
    assert len(classes) == len(set(classes)) == 365 and "tissue " in classes
    assert cfg.val_dataloader.dataset.classes == classes == cfg.test_dataloader.dataset.classes
    order = list(range(365))
    random.Random(0).shuffle(order)
    cats = [{"id": 1000 + k, "name": classes[i]} for k, i in enumerate(order)]
    person, flashlight = 1000 + order.index(0), 1000 + order.index(364)
    anns = [{"id": 1, "image_id": 1, "category_id": flashlight, "bbox": [1, 1, 5, 5], "area": 25, "iscrowd": 0},
            {"id": 2, "image_id": 1, "category_id": person, "bbox": [2, 2, 5, 5], "area": 25, "iscrowd": 0}]
    (tmp_path / "annotations").mkdir()
    (tmp_path / "train").mkdir()
    cv2.imwrite(str(tmp_path / "train" / "a.jpg"), np.zeros((20, 20, 3), np.uint8))
    with open(tmp_path / "annotations" / "train.json", "w") as f:
        json.dump({"images": [{"id": 1, "file_name": "a.jpg", "height": 20, "width": 20}], "annotations": anns,
                   "categories": cats}, f)
    ds = CocoDataset(data_root=str(tmp_path), ann_file="annotations/train.json", data_prefix={"img": "train"},
                     classes=classes)
    assert [i["bbox_label"] for i in ds.get_data_info(0)["instances"]] == [364, 0]
    with open(tmp_path / "annotations" / "train.json", "w") as f:
        json.dump({"images": [], "annotations": [], "categories": cats[1:]}, f)
    with pytest.raises(Exception, match=rf"class {classes[order[0]]!r} is not a category of"):
        CocoDataset(data_root=str(tmp_path), ann_file="annotations/train.json", data_prefix={"img": "train"},
                    classes=classes)


def champion_cfg():
    return load_config(os.path.join(ROOT, "configs", CHAMPION))


def test_champion_config_is_paddles_recipe():
    cfg = champion_cfg()
    model = cfg.model
    assert model.num_classes == 365 and model.backbone.type == "SENet"
    assert (model.backbone.depth, model.backbone.groups, model.backbone.group_width) == (152, 64, 4)
    assert model.backbone.dcn_stages == [False, True, True, True] and model.backbone.frozen_stages == 1
    assert model.neck.norm == {"type": "GN", "num_groups": 32}
    heads = model.roi_head.bbox_head
    assert [h.type for h in heads] == ["Shared4Conv1FCBBoxHead"] * 3 and all(h.norm.type == "GN" for h in heads)
    assert [h.bbox_coder.target_stds[0] for h in heads] == pytest.approx([1 / 10, 1 / 20, 1 / 30])  # Paddle's weights
    assert [s.sampler.num for s in model.train_cfg.rcnn] == [1024] * 3
    assert cfg.train_dataloader.sampler == {"type": "ClassAwareSampler"}
    resize = cfg.train_dataloader.dataset.pipeline[2]
    assert resize.type == "RandomResize" and resize.scale == [[1600, 416], [1600, 1408]]


def test_champion_full_size_count_and_shrunk_modes():
    """Full size: the hand count in tests/model_sizes.py (169,217,226). Shrunk: a finite loss that backpropagates
    (through the deformable convs' offsets too), predictions and raw outputs."""
    cfg = champion_cfg()
    with DefaultScope.overwrite_default_scope("detection"):
        with torch.device("meta"):
            full = MODELS.build(copy.deepcopy(cfg.model))
        model_sizes.check_size(CHAMPION, full)
        assert sum(isinstance(m, ModulatedDeformConv2d) for m in full.modules()) == 8 + 36 + 3
        torch.manual_seed(0)
        model = MODELS.build(config_checks_detection.shrink_model(cfg.model))
        assert isinstance(model.backbone, SENet) and model.backbone.out_channels == [8, 16, 32, 64]
        config_checks_detection.run_all_modes(model, cfg.model.num_classes)
        offsets = model.backbone.layer4[0].conv2.conv_offset.weight
        assert offsets.grad is not None and offsets.grad.abs().sum() > 0
