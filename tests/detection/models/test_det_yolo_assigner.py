"""YOLOv3 target assignment and ignore region, checked against hand-computed values (64x64 input)."""

from __future__ import annotations

import math

import pytest
import torch
from mmengine.structures import InstanceData

from detection.models.heads import YOLOv3Head
from detection.models.task_utils import YOLOAssigner, batched_box_iou, ignore_mask, wh_iou
from detection.structures import DetDataSample

ANCHORS = torch.tensor(
    [[10, 13], [16, 30], [33, 23], [30, 61], [62, 45], [59, 119], [116, 90], [156, 198], [373, 326]],
    dtype=torch.float32,
)
MASKS = [[6, 7, 8], [3, 4, 5], [0, 1, 2]]
STRIDES = [32, 16, 8]
SIZES = [(2, 2), (4, 4), (8, 8)]  # a 64x64 input; level offsets 0, 12, 60 (252 priors per image)


def _assigner() -> YOLOAssigner:
    return YOLOAssigner(ANCHORS, MASKS, STRIDES)


def _assign(boxes, labels, batch, num_images):
    return _assigner().assign(
        torch.tensor(boxes, dtype=torch.float32).reshape(-1, 4),
        torch.tensor(labels, dtype=torch.long),
        torch.tensor(batch, dtype=torch.long),
        SIZES,
        (64, 64),
        num_images,
    )


def test_level_offsets():
    assert _assigner().level_offsets(SIZES) == [0, 12, 60, 252]


def test_wh_iou_centred():
    iou = wh_iou(torch.tensor([[12.0, 14.0]]), ANCHORS[:2])
    assert iou[0, 0].item() == pytest.approx(130 / 168)
    assert iou[0, 1].item() == pytest.approx(168 / 480)


def test_single_box_small_anchor_level2():
    # centre (20, 28), 12x14: best anchor 0 (10x13), level 2 (stride 8), cell (2, 3).
    t = _assign([[14, 21, 26, 35]], [1], [0], 1)
    assert t.batch_idx.tolist() == [0]
    assert t.level.tolist() == [2]
    assert t.anchor_idx.tolist() == [0]
    assert t.grid_xy.tolist() == [[2, 3]]
    assert t.prior_idx.tolist() == [60 + (0 * 8 + 3) * 8 + 2]
    assert t.labels.tolist() == [1]
    torch.testing.assert_close(t.txy, torch.tensor([[0.5, 0.5]]))
    torch.testing.assert_close(t.twh, torch.tensor([[math.log(12 / 10), math.log(14 / 13)]]))
    torch.testing.assert_close(t.scale, torch.tensor([2 - 12 * 14 / (64 * 64)]))
    torch.testing.assert_close(t.gt_bboxes, torch.tensor([[14.0, 21.0, 26.0, 35.0]]))


def test_two_images_different_counts_and_an_empty_one():
    boxes = [
        [14, 21, 26, 35],  # image 0: anchor 0, level 2, cell (2, 3)
        [0, 0, 60, 50],  # image 2: 60x50 -> anchor 4 (62x45), level 1 local 1, stride 16, centre (30, 25) -> (1, 1)
        [40, 8, 56, 40],  # image 2: 16x32 -> anchor 1 (16x30), level 2 local 1, centre (48, 24) -> (6, 3)
    ]
    t = _assign(boxes, [0, 2, 1], [0, 2, 2], 3)  # image 1 has no boxes
    order = torch.argsort(t.gt_idx)
    assert t.gt_idx[order].tolist() == [0, 1, 2]
    assert t.batch_idx[order].tolist() == [0, 2, 2]
    assert t.level[order].tolist() == [2, 1, 2]
    assert t.anchor_idx[order].tolist() == [0, 4, 1]
    assert t.grid_xy[order].tolist() == [[2, 3], [1, 1], [6, 3]]
    assert t.prior_idx[order].tolist() == [86, 12 + (1 * 4 + 1) * 4 + 1, 60 + (1 * 8 + 3) * 8 + 6]
    torch.testing.assert_close(t.txy[order][1], torch.tensor([30 / 16 - 1, 25 / 16 - 1]))
    torch.testing.assert_close(t.twh[order][2], torch.tensor([math.log(16 / 16), math.log(32 / 30)]))
    torch.testing.assert_close(t.scale[order][1], torch.tensor(2 - 3000 / 4096))


def test_no_boxes_at_all():
    t = _assign([], [], [], 2)
    assert len(t.batch_idx) == 0 and t.txy.shape == (0, 2) and t.gt_bboxes.shape == (0, 4)


def test_degenerate_box_is_never_positive():
    t = _assign([[10, 10, 10, 30], [14, 21, 26, 35]], [0, 1], [0, 0], 1)
    assert t.gt_idx.tolist() == [1]


def test_same_prior_later_box_wins():
    t = _assign([[14, 21, 26, 35], [14.5, 21, 25.5, 35]], [0, 1], [0, 0], 1)
    assert t.gt_idx.tolist() == [1] and t.labels.tolist() == [1]
    # The same boxes in different images do not collide.
    t = _assign([[14, 21, 26, 35], [14.5, 21, 25.5, 35]], [0, 1], [0, 1], 2)
    assert sorted(t.batch_idx.tolist()) == [0, 1]


def test_batched_box_iou_matches_torchvision():
    from torchvision.ops import box_iou

    g = torch.Generator().manual_seed(0)
    xy = torch.rand(2, 5, 2, generator=g) * 50
    a = torch.cat([xy, xy + 5 + torch.rand(2, 5, 2, generator=g) * 20], -1)
    xy = torch.rand(2, 3, 2, generator=g) * 50
    b = torch.cat([xy, xy + 5 + torch.rand(2, 3, 2, generator=g) * 20], -1)
    out = batched_box_iou(a, b)
    for i in range(2):
        torch.testing.assert_close(out[i], box_iou(a[i], b[i]))


def test_ignore_mask_constructed():
    gt = torch.tensor([[[10.0, 10, 30, 30], [0, 0, 0, 0]], [[40, 40, 60, 60], [40, 40, 60, 60]]])
    valid = torch.tensor([[True, False], [True, False]])  # image 1's second slot is padding
    pred = torch.tensor(
        [
            [[10.0, 10, 30, 30], [10, 10, 30, 35], [0, 0, 0.5, 0.5]],  # IoU 1, 0.8, 0 (vs the padded zero box: 0)
            [[10.0, 10, 30, 30], [40, 40, 60, 70], [40, 40, 60, 60]],  # 0, 0.667, 1
        ]
    )
    mask = ignore_mask(pred, gt, valid, 0.7)
    assert mask.tolist() == [[True, True, False], [False, False, True]]
    # Padding must never cause ignoring even when a prediction equals the padded box.
    gt[1, 1] = torch.tensor([10.0, 10, 30, 30])
    assert not ignore_mask(pred, gt, valid, 0.7)[1, 0]
    assert not ignore_mask(pred, gt[:, :0], valid[:, :0], 0.7).any()


def _sample(boxes, labels, ignored=None) -> DetDataSample:
    s = DetDataSample(metainfo=dict(img_shape=(64, 64), batch_input_shape=(64, 64), scale_factor=(1.0, 1.0)))
    s.gt_instances = InstanceData(
        bboxes=torch.tensor(boxes, dtype=torch.float32).reshape(-1, 4), labels=torch.tensor(labels, dtype=torch.long)
    )
    if ignored is not None:
        s.ignored_instances = InstanceData(
            bboxes=torch.tensor(ignored, dtype=torch.float32).reshape(-1, 4),
            labels=torch.zeros(len(ignored), dtype=torch.long),
        )
    return s


def test_head_targets_ignored_boxes_and_ignore_region():
    head = YOLOv3Head(num_classes=3, in_channels=[8, 8, 8])
    c = 5 + 3
    raw = [torch.zeros(2, 3 * c, h, w) for h, w in SIZES]
    # Level 2, anchor 1 (16x30) at cell (2, 3): decoded box set to exactly the gt 12x14 box at (20, 28).
    raw[2][0, 1 * c + 2, 3, 2] = math.log(12 / 16)
    raw[2][0, 1 * c + 3, 3, 2] = math.log(14 / 30)
    # Image 1: an ignored (crowd) box equal to the zero-output box of level 1, anchor 3 (30x61) at cell (1, 1).
    crowd = [[24 - 15, 24 - 30.5, 24 + 15, 24 + 30.5]]
    samples = [_sample([[14, 21, 26, 35]], [2]), _sample([], [], ignored=crowd)]
    t, ignored = head.get_targets(raw, samples)
    assert t.batch_idx.tolist() == [0] and t.prior_idx.tolist() == [86]  # the crowd box is no positive
    neg_a1 = 60 + (1 * 8 + 3) * 8 + 2
    neg_a2 = 60 + (2 * 8 + 3) * 8 + 2  # 33x23 at the same cell: IoU 168/759 with the gt
    assert ignored[0, neg_a1] and not ignored[0, neg_a2]
    crowd_prior = 12 + (0 * 4 + 1) * 4 + 1
    assert ignored[1, crowd_prior] and ignored[1].sum() == 1
    # The ignored negative gets no objectness loss: raising its objectness logit does not change loss_obj.
    base = head.loss_by_feat(raw, samples)["loss_obj"]
    raw[2][0, 1 * c + 4, 3, 2] = 5.0
    assert head.loss_by_feat(raw, samples)["loss_obj"].item() == pytest.approx(base.item())
    raw[2][0, 2 * c + 4, 3, 2] = 5.0  # a plain negative does
    assert head.loss_by_feat(raw, samples)["loss_obj"].item() > base.item() + 1
