"""FCOS: the anchor-free assignment (FCOSAssigner, a TASK_UTILS part) on a hand-computed case, the head's box
coding, and its loss (finite, with gradients, swappable box loss)."""

from __future__ import annotations

import copy

import pytest
import torch
from mmengine.structures import InstanceData

from detection.models.heads import FCOSHead
from detection.registry import MODELS, TASK_UTILS
from detection.structures import DetDataSample

# points (x, y) with their strides: three of level 0 (stride 8), then two of level 1 (stride 16), then one more of
# level 0 is not allowed (levels are contiguous), so level 0 holds P0, P1, P2, P5 ... reordered below.
A = [10.0, 10.0, 40.0, 40.0]  # area 900, centre (25, 25)
B = [0.0, 0.0, 200.0, 120.0]  # area 24000, centre (100, 60)
C = [90.0, 40.0, 110.0, 80.0]  # area 800, centre (100, 60)
B2 = [60.0, 20.0, 140.0, 100.0]  # area 6400, centre (100, 60)
# level 0 (stride 8): P0 (20, 20), P1 (36, 20), P2 (100, 100), P5 (100, 60); level 1 (stride 16): P3 (40, 40),
# P4 (120, 56)
POINTS = torch.tensor([[20.0, 20.0], [36.0, 20.0], [100.0, 100.0], [100.0, 60.0], [40.0, 40.0], [120.0, 56.0]])
STRIDES = torch.tensor([8.0, 8.0, 8.0, 8.0, 16.0, 16.0])
RANGES = [[-1, 64], [64, 100000000]]


def _assign(center_sampling: bool) -> torch.Tensor:
    assigner = TASK_UTILS.build(dict(type="FCOSAssigner", regress_ranges=RANGES, center_sampling=center_sampling,
                                     center_sampling_radius=1.5))
    gts = torch.tensor([[A, B, C, B2], [C, [0.0] * 4, [0.0] * 4, [0.0] * 4]])
    valid = torch.tensor([[True] * 4, [True, False, False, False]])
    return assigner.assign(POINTS, STRIDES, [4, 2], gts, valid)


def test_fcos_assignment_hand_computed():
    """Image 0, with centre sampling (radius 1.5 strides):
    P0 (20, 20) s8: A inside, 5 px from its centre (< 12), farthest side 20 in (-1, 64); B is 80 px off -> A.
    P1 (36, 20) s8: A, 11 px off its centre (< 12), farthest side 26 -> A.
    P2 (100, 100) s8: only B contains it (B2's bottom side is at 100: not strictly inside), 40 px off -> none.
    P5 (100, 60) s8: C (farthest 20) and B2 (farthest 40) qualify, B's farthest side 100 is beyond 64 -> the
        smaller C.
    P3 (40, 40) s16: on A's right side (distance 0, not inside); B 60 px off its centre (>= 24) -> none.
    P4 (120, 56) s16: B (20 px off, farthest side 120 in (64, inf)); B2's farthest side 60 < 64 -> B.
    Image 1 has one box (C, the other rows are padding): only P5 lies in it."""
    got = _assign(center_sampling=True)
    assert got.tolist() == [[0, 0, -1, 2, -1, 1], [-1, -1, -1, 0, -1, -1]]
    # Without centre sampling P3 lies inside B with farthest side 160 in (64, inf): it regresses B.
    assert _assign(center_sampling=False).tolist() == [[0, 0, -1, 2, 1, 1], [-1, -1, -1, 0, -1, -1]]


def test_fcos_assignment_without_boxes_and_errors():
    assigner = TASK_UTILS.build(dict(type="FCOSAssigner", regress_ranges=RANGES))
    empty = assigner.assign(POINTS, STRIDES, [4, 2], torch.zeros(2, 0, 4), torch.zeros(2, 0, dtype=torch.bool))
    assert empty.tolist() == [[-1] * 6] * 2
    with pytest.raises(ValueError, match="3 levels but 2 regress_ranges"):
        assigner.assign(POINTS, STRIDES, [2, 2, 2], torch.zeros(1, 1, 4), torch.ones(1, 1, dtype=torch.bool))
    with pytest.raises(ValueError, match="lo < hi"):
        TASK_UTILS.build(dict(type="FCOSAssigner", regress_ranges=[[64, 0]]))


HEAD = dict(
    type="FCOSHead",
    num_classes=3,
    in_channels=[16, 16],
    stacked_convs=2,
    norm=dict(type="GN", num_groups=4),
    anchor_generator=dict(type="AnchorGenerator", scales=[1.0], ratios=[1.0], strides=[8, 16], center_offset=0.5),
    loss_cls=dict(type="FocalLoss", alpha=0.25, gamma=2.0),
    loss_bbox=dict(type="GIoULoss"),
    loss_centerness=dict(type="CrossEntropyLoss", use_sigmoid=True),
    train_cfg=dict(assigner=dict(type="FCOSAssigner", regress_ranges=RANGES)),
    test_cfg=dict(score_thr=0.05, nms_pre=50, nms=dict(iou_threshold=0.5), max_per_img=20),
)


def test_box_coding_is_torchvision_linear_coder():
    from torchvision.models.detection._utils import BoxLinearCoder

    g = torch.Generator().manual_seed(0)
    anchors = torch.tensor([[0.0, 0.0, 8.0, 8.0], [16.0, 8.0, 32.0, 24.0]])
    rel = torch.rand(2, 4, generator=g) * 3
    ref = BoxLinearCoder(normalize_by_size=True)
    torch.testing.assert_close(FCOSHead.decode(anchors, rel), ref.decode(rel, anchors), rtol=0, atol=0)
    boxes = FCOSHead.decode(anchors, rel)
    torch.testing.assert_close(FCOSHead.encode(anchors, boxes), ref.encode(anchors, boxes))


def _samples() -> list[DetDataSample]:
    samples = []
    for boxes in ([[4.0, 6.0, 30.0, 40.0], [20.0, 10.0, 60.0, 50.0], [0.0, 0.0, 64.0, 60.0]], []):
        s = DetDataSample(metainfo=dict(img_shape=(64, 64), batch_input_shape=(64, 64)))
        s.gt_instances = InstanceData(bboxes=torch.tensor(boxes).reshape(-1, 4), labels=torch.arange(len(boxes)) % 3)
        samples.append(s)
    return samples


def test_fcos_loss_is_torchvision_loss():
    """With torchvision's points (cell corners, center_offset 0), our assignment + losses give torchvision's
    ``FCOS.compute_loss`` on the same head outputs."""
    from torch import nn
    from torchvision.models.detection.fcos import FCOS
    from torchvision.models.detection.fcos import FCOSHead as TorchvisionFCOSHead

    torch.manual_seed(0)
    cfg = copy.deepcopy(HEAD)
    cfg["anchor_generator"] = dict(type="AnchorGenerator", sizes=[[8], [16]], ratios=[1.0], strides=[8, 16],
                                   center_offset=0.0, round_base_anchors=True)
    head = MODELS.build(cfg)
    with torch.no_grad():
        head.regression_head["bbox_reg"].bias.fill_(2.0)  # boxes of a few strides, overlapping the gt
    feats = [torch.randn(2, 16, 8, 8), torch.randn(2, 16, 4, 4)]
    raw = head(feats)
    samples = _samples()
    ours = head.loss_by_feat(*raw, samples)

    tv = FCOS.__new__(FCOS)  # only compute_loss: no backbone needed
    nn.Module.__init__(tv)
    tv.center_sampling_radius = 1.5
    tv.head = TorchvisionFCOSHead(32, 1, 3, num_convs=1)  # only its box coder is used
    from detection.models.heads.dense_utils import flatten_levels

    outputs = dict(cls_logits=flatten_levels(raw[0], 3), bbox_regression=flatten_levels(raw[1], 4),
                   bbox_ctrness=flatten_levels(raw[2], 1))
    levels = head.prior_generator.grid_priors([(8, 8), (4, 4)])
    anchors = [torch.cat(levels)] * 2
    targets = [dict(boxes=s.gt_instances.bboxes, labels=s.gt_instances.labels) for s in samples]
    ref = tv.compute_loss(targets, outputs, anchors, [len(a) for a in levels])
    torch.testing.assert_close(ours["loss_cls"], ref["classification"])
    torch.testing.assert_close(ours["loss_bbox"], ref["bbox_regression"])
    torch.testing.assert_close(ours["loss_centerness"], ref["bbox_ctrness"])
    assert ref["bbox_regression"] > 0


@pytest.mark.parametrize("loss_bbox", [dict(type="GIoULoss"), dict(type="L1Loss")])
def test_fcos_loss_has_gradients(loss_bbox):
    torch.manual_seed(0)
    head = MODELS.build({**copy.deepcopy(HEAD), "loss_bbox": loss_bbox})
    feats = [torch.randn(2, 16, 8, 8, requires_grad=True), torch.randn(2, 16, 4, 4, requires_grad=True)]
    losses = head.loss(feats, _samples())
    assert set(losses) == {"loss_cls", "loss_bbox", "loss_centerness"}
    assert all(torch.isfinite(v) and v > 0 for v in losses.values())
    sum(losses.values()).backward()
    assert feats[0].grad.abs().sum() > 0 and head.scales.grad is not None
