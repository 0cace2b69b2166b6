"""multiclass_nms: same result as torchvision's batched_nms on the same candidates; thresholds and limits."""

from __future__ import annotations

import pytest
import torch
from torchvision.ops import batched_nms

from detection.models.task_utils import multiclass_nms


def _random(n: int = 200, c: int = 4, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g) * 100
    boxes = torch.cat([xy, xy + 5 + torch.rand(n, 2, generator=g) * 40], dim=1)
    return boxes, torch.rand(n, c, generator=g)


def test_equals_direct_batched_nms():
    boxes, scores = _random()
    out_boxes, out_scores, out_labels = multiclass_nms(boxes, scores, 0.3, 0.5, max_per_img=1000, nms_pre=None)
    idx, cls = (scores > 0.3).nonzero(as_tuple=True)
    keep = batched_nms(boxes[idx], scores[idx, cls], cls, 0.5)
    torch.testing.assert_close(out_boxes, boxes[idx][keep])
    torch.testing.assert_close(out_scores, scores[idx, cls][keep])
    assert torch.equal(out_labels, cls[keep])
    assert out_labels.dtype == torch.long
    assert torch.all(out_scores[:-1] >= out_scores[1:])


def test_nms_pre_and_max_per_img():
    boxes, scores = _random()
    b, s, lab = multiclass_nms(boxes, scores, 0.0, 0.5, max_per_img=7, nms_pre=50)
    assert len(b) == len(s) == len(lab) == 7
    flat = scores.flatten()
    top = flat.topk(50).values
    assert s.min() >= top.min()  # every kept pair is among the 50 best
    idx, cls = (scores > 0.0).nonzero(as_tuple=True)
    cand = scores[idx, cls]
    order = cand.topk(50).indices
    keep = batched_nms(boxes[idx[order]], cand[order], cls[order], 0.5)[:7]
    torch.testing.assert_close(s, cand[order][keep])


def test_same_class_suppressed_other_class_kept():
    boxes = torch.tensor([[0.0, 0, 10, 10], [1, 0, 11, 10], [0, 0, 10, 10]])
    scores = torch.tensor([[0.9, 0.0], [0.8, 0.0], [0.0, 0.7]])
    b, s, lab = multiclass_nms(boxes, scores, 0.05, 0.5)
    assert lab.tolist() == [0, 1] and s.tolist() == pytest.approx([0.9, 0.7])


def test_nothing_above_threshold():
    boxes, scores = _random(10)
    b, s, lab = multiclass_nms(boxes, scores * 0.1, 0.5, 0.5)
    assert b.shape == (0, 4) and s.shape == (0,) and lab.shape == (0,)


def test_shape_errors():
    with pytest.raises(ValueError, match="boxes"):
        multiclass_nms(torch.zeros(3, 5), torch.zeros(3, 2), 0.1, 0.5)
    with pytest.raises(ValueError, match="scores"):
        multiclass_nms(torch.zeros(3, 4), torch.zeros(4, 2), 0.1, 0.5)
