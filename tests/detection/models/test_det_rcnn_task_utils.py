"""Anchors, box coder, assigner, samplers and losses of the two-stage heads, on hand-computed cases and against
torchvision's AnchorGenerator / BoxCoder."""

from __future__ import annotations

import math

import pytest
import torch
from torchvision.models.detection._utils import BoxCoder
from torchvision.models.detection.anchor_utils import AnchorGenerator as TvAnchorGenerator
from torchvision.models.detection.image_list import ImageList

from detection.models.losses import CrossEntropyLoss, L1Loss, SmoothL1Loss
from detection.models.task_utils import (
    AnchorGenerator,
    DeltaXYWHBBoxCoder,
    MaxIoUAssigner,
    PseudoSampler,
    RandomSampler,
)
from detection.registry import TASK_UTILS


# ----------------------------------------------------------------------------- anchors
def test_base_anchors_hand_computed():
    gen = AnchorGenerator(strides=[4], ratios=[0.5, 1.0, 2.0], scales=[8])
    (anchors,) = gen.grid_priors([(1, 2)])
    # base 4 * scale 8 = 32; ratio 0.5 -> w = 32 / sqrt(.5), h = 32 * sqrt(.5)
    w, h = 32 / math.sqrt(0.5), 32 * math.sqrt(0.5)
    torch.testing.assert_close(anchors[0], torch.tensor([-w / 2, -h / 2, w / 2, h / 2]))
    torch.testing.assert_close(anchors[1], torch.tensor([-16.0, -16.0, 16.0, 16.0]))
    # second position (x = 1) shifted by the stride, anchor-minor order
    torch.testing.assert_close(anchors[4], torch.tensor([-12.0, -16.0, 20.0, 16.0]))
    assert gen.num_base_anchors == [3] and anchors.shape == (6, 4)


def test_anchors_match_torchvision_in_the_torchvision_preset():
    sizes, ratios = (32, 64, 128, 256, 512), (0.5, 1.0, 2.0)
    tv = TvAnchorGenerator(tuple((s,) for s in sizes), (ratios,) * 5)
    ours = AnchorGenerator(strides=[4, 8, 16, 32, 64], ratios=list(ratios), scales=[8],
                           round_base_anchors=True, strides_from_image=True)
    image = torch.zeros(1, 3, 800, 1216)
    shapes = [(200, 304), (100, 152), (50, 76), (25, 38), (13, 19)]  # P6 of 800 px: 13 cells -> stride 61
    feats = [torch.zeros(1, 1, h, w) for h, w in shapes]
    expected = tv(ImageList(image, [(800, 1216)]), feats)[0]
    got = torch.cat(ours.grid_priors(shapes, image_size=(800, 1216)))
    torch.testing.assert_close(got, expected)


def test_anchor_errors_and_valid_flags():
    with pytest.raises(ValueError, match="scales"):
        AnchorGenerator(strides=[8], ratios=[1.0])
    gen = AnchorGenerator(strides=[8, 16], ratios=[1.0], scales=[4])
    with pytest.raises(ValueError, match="2 strides"):
        gen.grid_priors([(4, 4)])
    flags = gen.valid_flags([(4, 4), (2, 2)], pad_shape=(16, 32))
    assert flags[0].reshape(4, 4)[:2].all() and not flags[0].reshape(4, 4)[2:].any()
    assert flags[1].reshape(2, 2)[0].all() and not flags[1].reshape(2, 2)[1].any()


def test_octave_scales():
    gen = AnchorGenerator(strides=[8], ratios=[1.0], octave_base_scale=4, scales_per_octave=3)
    assert gen.scales == pytest.approx([4, 4 * 2 ** (1 / 3), 4 * 2 ** (2 / 3)])


# ----------------------------------------------------------------------------- coder
def test_coder_roundtrip_and_torchvision_parity():
    torch.manual_seed(0)
    xy = torch.rand(50, 2) * 100
    priors = torch.cat([xy, xy + 5 + torch.rand(50, 2) * 50], 1)
    gxy = torch.rand(50, 2) * 100
    gts = torch.cat([gxy, gxy + 5 + torch.rand(50, 2) * 50], 1)
    coder = DeltaXYWHBBoxCoder(target_stds=(0.1, 0.1, 0.2, 0.2))
    deltas = coder.encode(priors, gts)
    torch.testing.assert_close(coder.decode(priors, deltas), gts, atol=1e-3, rtol=0)
    tv = BoxCoder(weights=(10.0, 10.0, 5.0, 5.0))
    torch.testing.assert_close(deltas, tv.encode_single(gts, priors), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(coder.decode(priors, deltas), tv.decode_single(deltas, priors), atol=1e-3, rtol=0)


def test_coder_hand_case_clamp_and_clip():
    coder = DeltaXYWHBBoxCoder()
    prior = torch.tensor([[0.0, 0.0, 10.0, 20.0]])
    gt = torch.tensor([[5.0, 0.0, 25.0, 20.0]])
    torch.testing.assert_close(coder.encode(prior, gt), torch.tensor([[1.0, 0.0, math.log(2.0), 0.0]]))
    huge = coder.decode(prior, torch.tensor([[0.0, 0.0, 100.0, 0.0]]))
    assert torch.isfinite(huge).all() and (huge[0, 2] - huge[0, 0]) == pytest.approx(10 * 1000 / 16, rel=1e-4)
    clipped = coder.decode(prior, torch.tensor([[0.0, 0.0, 2.0, 0.0]]), max_shape=(15, 30))
    assert clipped[0, 0] == 0 and clipped[0, 2] == 30 and clipped[0, 3] == 15
    # broadcasting: [N, 1, 4] priors with class-specific deltas [N, C, 4]
    assert coder.decode(prior[:, None], torch.zeros(1, 3, 4)).shape == (1, 3, 4)
    with pytest.raises(ValueError, match="target_stds"):
        DeltaXYWHBBoxCoder(target_stds=(1, 1, 1))


def test_coder_degenerate_gt_gives_finite_targets():
    deltas = DeltaXYWHBBoxCoder().encode(torch.tensor([[0.0, 0.0, 10.0, 10.0]]), torch.tensor([[5.0, 5.0, 5.0, 9.0]]))
    assert torch.isfinite(deltas).all()


def test_coder_is_fp32_under_autocast():
    coder = DeltaXYWHBBoxCoder()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = coder.decode(torch.tensor([[0.0, 0.0, 10.0, 10.0]]).bfloat16(), torch.zeros(1, 4).bfloat16())
    assert out.dtype == torch.float32


# ----------------------------------------------------------------------------- assigner
BOXES = torch.tensor([
    [0.0, 0.0, 10.0, 10.0],   # IoU 1 with gt 0 -> positive
    [0.0, 0.0, 10.0, 5.0],    # IoU 0.5 with gt 0 -> between thresholds -> ignored
    [50.0, 50.0, 60.0, 60.0],  # no overlap -> negative
    [20.0, 20.0, 30.0, 27.0],  # IoU 0.7 with gt 1 (its best) -> low-quality positive
])
GTS = torch.tensor([[0.0, 0.0, 10.0, 10.0], [20.0, 20.0, 30.0, 30.0]])
LABELS = torch.tensor([2, 1])


def test_max_iou_assigner_hand_case():
    assigner = MaxIoUAssigner(pos_iou_thr=0.8, neg_iou_thr=0.3, min_pos_iou=0.3)
    res = assigner.assign(BOXES, GTS, LABELS)
    assert res.gt_inds.tolist() == [1, -1, 0, 2]
    assert res.labels.tolist() == [2, -1, -1, 1]
    torch.testing.assert_close(res.max_overlaps, torch.tensor([1.0, 0.5, 0.0, 0.7]))
    strict = MaxIoUAssigner(pos_iou_thr=0.8, neg_iou_thr=0.3, match_low_quality=False).assign(BOXES, GTS, LABELS)
    assert strict.gt_inds.tolist() == [1, -1, 0, -1]
    ranged = MaxIoUAssigner(pos_iou_thr=0.8, neg_iou_thr=(0.1, 0.6), match_low_quality=False)
    assert ranged.assign(BOXES, GTS, LABELS).gt_inds.tolist() == [1, 0, -1, -1]


def test_assigner_no_gt_ignore_regions_and_errors():
    assigner = MaxIoUAssigner(pos_iou_thr=0.5, neg_iou_thr=0.5, ignore_iof_thr=0.5)
    empty = assigner.assign(BOXES, torch.zeros(0, 4), torch.zeros(0, dtype=torch.long))
    assert empty.gt_inds.tolist() == [0, 0, 0, 0] and empty.num_gts == 0
    res = assigner.assign(BOXES, GTS, LABELS, gt_bboxes_ignore=torch.tensor([[45.0, 45.0, 65.0, 65.0]]))
    assert res.gt_inds[2] == -1  # inside a crowd region: neither positive nor negative
    with pytest.raises(ValueError, match="exceeds pos_iou_thr"):
        MaxIoUAssigner(pos_iou_thr=0.3, neg_iou_thr=0.5)


def test_low_quality_later_gt_wins_a_shared_prior():
    priors = torch.tensor([[0.0, 0.0, 10.0, 10.0]])
    gts = torch.tensor([[0.0, 0.0, 10.0, 30.0], [0.0, 0.0, 30.0, 10.0]])  # both IoU 1/3 with the prior
    res = MaxIoUAssigner(0.7, 0.3, min_pos_iou=0.3).assign(priors, gts, torch.tensor([0, 1]))
    assert res.gt_inds.tolist() == [2]


# ----------------------------------------------------------------------------- samplers
def _assign(n_pos: int, n_neg: int, n_ign: int):
    from detection.models.task_utils import AssignResult

    gt_inds = torch.cat([torch.ones(n_pos, dtype=torch.long), torch.zeros(n_neg, dtype=torch.long),
                         torch.full((n_ign,), -1, dtype=torch.long)])
    labels = torch.where(gt_inds > 0, 0, -1)
    return AssignResult(1, gt_inds, torch.zeros(len(gt_inds)), labels)


def test_random_sampler_budget_and_gt_added():
    torch.manual_seed(0)
    n = 300
    priors = torch.rand(n, 4)
    gt = torch.tensor([[1.0, 1.0, 5.0, 5.0]])
    sampler = RandomSampler(num=64, pos_fraction=0.25, add_gt_as_proposals=True)
    res = sampler.sample(_assign(100, 150, 50), priors, gt, torch.tensor([0]))
    assert res.priors.shape == (n + 1, 4) and res.gt_added
    assert res.pos_inds.numel() == 16 and res.neg_inds.numel() == 48
    assert len(set(res.pos_inds.tolist())) == 16 and (res.pos_assigned_gt_inds == 0).all()
    assert torch.equal(res.pos_gt_bboxes, gt.expand(16, 4))
    few = sampler.sample(_assign(2, 5, 0), torch.rand(7, 4), gt, torch.tensor([0]))
    assert few.pos_inds.numel() == 3 and few.neg_inds.numel() == 5  # the gt itself is a positive
    assert few.pos_is_gt.sum() == 1
    capped = RandomSampler(64, 0.5, neg_pos_ub=2, add_gt_as_proposals=False).sample(
        _assign(3, 100, 0), torch.rand(103, 4), gt, torch.tensor([0]))
    assert capped.pos_inds.numel() == 3 and capped.neg_inds.numel() == 6


def test_pseudo_sampler_and_registry():
    res = PseudoSampler().sample(_assign(2, 3, 4), torch.rand(9, 4), torch.rand(1, 4), torch.tensor([0]))
    assert res.pos_inds.tolist() == [0, 1] and res.neg_inds.tolist() == [2, 3, 4]
    built = TASK_UTILS.build(dict(type="RandomSampler", num=8, pos_fraction=0.5))
    assert isinstance(built, RandomSampler)


# ----------------------------------------------------------------------------- losses
def test_losses_hand_computed():
    logits = torch.tensor([[2.0, 0.0], [0.0, 0.0]])
    ce = CrossEntropyLoss()(logits, torch.tensor([0, 1]))
    expected = (math.log(1 + math.exp(-2.0)) + math.log(2.0)) / 2
    assert ce.item() == pytest.approx(expected, rel=1e-6)
    bce = CrossEntropyLoss(use_sigmoid=True)(torch.tensor([0.0, 0.0]), torch.tensor([1.0, 0.0]), avg_factor=4)
    assert bce.item() == pytest.approx(2 * math.log(2.0) / 4, rel=1e-6)
    # int labels with sigmoid: label C is background (all-zero row)
    onehot = CrossEntropyLoss(use_sigmoid=True, reduction="sum")(torch.zeros(2, 3), torch.tensor([1, 3]))
    assert onehot.item() == pytest.approx(6 * math.log(2.0), rel=1e-6)
    assert L1Loss(loss_weight=2.0)(torch.tensor([1.0, 3.0]), torch.tensor([0.0, 0.0])).item() == pytest.approx(4.0)
    sl1 = SmoothL1Loss(beta=1.0, reduction="sum")(torch.tensor([0.5, 3.0]), torch.zeros(2))
    assert sl1.item() == pytest.approx(0.125 + 2.5)


def test_losses_empty_inputs_have_grad_and_no_nan():
    pred = torch.zeros(0, 4, requires_grad=True)
    for loss in (L1Loss()(pred, torch.zeros(0, 4)), L1Loss()(pred, torch.zeros(0, 4), avg_factor=0)):
        assert loss.item() == 0.0
        loss.backward()
    with pytest.raises(ValueError, match="reduction"):
        L1Loss(reduction="avg")
