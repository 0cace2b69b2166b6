"""Tiny inputs shared by the RoI head tests: pyramid features, data samples with boxes and masks, proposals."""

from __future__ import annotations

import pytest
import torch
from mmengine.structures import InstanceData

from detection.structures import DetDataSample

STRIDES = [4, 8, 16, 32, 64]
IMG = 64


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
