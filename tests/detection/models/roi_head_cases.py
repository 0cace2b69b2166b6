"""Tiny inputs shared by the RoI head tests: pyramid features, data samples with boxes and masks, proposals, and
the heads' arguments as the base model YAML files state them (the heads have no defaults in code)."""

from __future__ import annotations

import copy
import os
from typing import Any

import pytest
import torch
from mmengine.structures import InstanceData

from detection.structures import DetDataSample
from oars.config import load_config

STRIDES = [4, 8, 16, 32, 64]
IMG = 64
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
_MODELS = os.path.join(_ROOT, "configs", "_base_", "models")
MASK_RCNN = load_config(os.path.join(_MODELS, "mask_rcnn_r50_fpn.yaml")).to_dict()["model"]
CASCADE_RCNN = load_config(os.path.join(_MODELS, "cascade_rcnn_r50_fpn.yaml")).to_dict()["model"]


def base(model: dict[str, Any], *path: str | int, drop: tuple[str, ...] = (), **updates: Any) -> Any:
    """A deep copy of ``model[path[0]][path[1]]...`` (a base YAML's model), without the keys ``drop``, updated."""
    node = model
    for key in path:
        node = node[key]
    node = copy.deepcopy(node)
    if isinstance(node, dict):
        node = {k: v for k, v in node.items() if k not in drop}
        node.update(updates)
    return node


def bbox_head_args(**updates: Any) -> dict[str, Any]:
    """Keyword arguments of a box head class: Mask R-CNN's ``roi_head.bbox_head`` without type and width."""
    return base(MASK_RCNN, "roi_head", "bbox_head", drop=("type", "fc_out_channels"), **updates)


def mask_head_args(**updates: Any) -> dict[str, Any]:
    """Keyword arguments of ``FCNMaskHead``: Mask R-CNN's ``roi_head.mask_head`` without type (roi_feat_size 14)."""
    return base(MASK_RCNN, "roi_head", "mask_head", drop=("type",), **{"roi_feat_size": 14, **updates})


def rcnn_cfg(section: str, with_mask: bool = True, **updates: Any) -> dict[str, Any]:
    """Mask R-CNN's ``train_cfg.rcnn`` / ``test_cfg.rcnn`` (``section``), without the mask keys for box-only heads."""
    drop = () if with_mask else ("mask_size", "mask_thr_binary")
    return base(MASK_RCNN, section, "rcnn", drop=drop, **updates)


@pytest.fixture(autouse=True)
def one_thread():
    """Run single-threaded: on these tiny tensors intra-op threads only add synchronisation, and beside busy
    processes two threads made a training step 30x slower (measured: 0.05 s vs 1-5 s)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def pyramid(batch: int = 2, channels: int = 8, img: int = IMG, seed: int = 0) -> list[torch.Tensor]:
    """FPN-like maps ``[B, channels, img / s, img / s]`` for strides 4..64."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, channels, max(1, img // s), max(1, img // s), generator=g) for s in STRIDES]


def data_sample(boxes: list[list[float]], labels: list[int], img: int = IMG, scale: float = 1.0,
                with_mask: bool = True) -> DetDataSample:
    """A sample whose gt masks fill the boxes (rounded); ``scale`` = pipeline / original (ori = img / scale)."""
    ori = (round(img / scale), round(img / scale))
    sample = DetDataSample(metainfo=dict(img_shape=(img, img), ori_shape=ori, batch_input_shape=(img, img),
                                         scale_factor=(scale, scale)))
    b = torch.tensor(boxes, dtype=torch.float32).reshape(-1, 4)
    gt = InstanceData(bboxes=b, labels=torch.tensor(labels, dtype=torch.long))
    if with_mask:
        masks = torch.zeros((len(b), img, img), dtype=torch.uint8)
        for i, (x1, y1, x2, y2) in enumerate(b.round().long().tolist()):
            masks[i, y1:y2, x1:x2] = 1
        gt.masks = masks
    sample.gt_instances = gt
    return sample


def jittered_proposals(gt: torch.Tensor, num: int, seed: int = 0, img: int = IMG) -> InstanceData:
    """``num`` proposals: gt boxes shifted/scaled by up to ~30 % plus random boxes (what an RPN gives)."""
    g = torch.Generator().manual_seed(seed)
    parts = []
    if len(gt):
        base = gt[torch.randint(len(gt), (num // 2,), generator=g)]
        wh = (base[:, 2:] - base[:, :2]).repeat(1, 2)
        parts.append(base + (torch.rand(base.shape, generator=g) - 0.5) * 0.6 * wh)
    xy = torch.rand((num - sum(len(p) for p in parts), 2), generator=g) * (img - 8)
    parts.append(torch.cat([xy, xy + 4 + torch.rand(xy.shape, generator=g) * (img / 2)], dim=1))
    boxes = torch.cat(parts).clamp(0, img)
    boxes[:, 2:] = torch.maximum(boxes[:, 2:], boxes[:, :2] + 1)
    return InstanceData(bboxes=boxes, scores=torch.rand(len(boxes), generator=g))
