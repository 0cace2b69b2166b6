"""RetinaNet's parts: the registered focal loss against torchvision's op, per-level anchor sizes as torchvision's
AnchorGenerator, the head's loss against torchvision's RetinaNet loss, swappable box losses, initialisation, and
the FPN's P6 source (C5 or P5)."""

from __future__ import annotations

import copy

import pytest
import torch
from mmengine.structures import InstanceData
from torchvision.ops import sigmoid_focal_loss

from detection.registry import MODELS, TASK_UTILS
from detection.structures import DetDataSample


def test_focal_loss_is_torchvision_sigmoid_focal_loss():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(50, 7, generator=g) * 3
    labels = torch.randint(0, 9, (50,), generator=g)  # 7 and 8: background
    onehot = torch.nn.functional.one_hot(labels, 9)[:, :7].float()
    loss = MODELS.build(dict(type="FocalLoss", alpha=0.25, gamma=2.0, loss_weight=2.0))
    ref = sigmoid_focal_loss(logits, onehot, alpha=0.25, gamma=2.0, reduction="sum")
    torch.testing.assert_close(loss(logits, labels, avg_factor=10.0), 2.0 * ref / 10)
    torch.testing.assert_close(loss(logits, onehot, avg_factor=10.0), 2.0 * ref / 10)
    weight = (torch.arange(50) % 2).float()  # per row: ignored rows count nothing
    ref_w = sigmoid_focal_loss(logits[1::2], onehot[1::2], alpha=0.25, gamma=2.0, reduction="sum")
    torch.testing.assert_close(loss(logits, labels, weight, avg_factor=10.0), 2.0 * ref_w / 10)
    plain = MODELS.build(dict(type="FocalLoss", alpha=-1, gamma=0.0, reduction="none"))  # = BCE with logits
    torch.testing.assert_close(plain(logits, onehot), torch.nn.functional.binary_cross_entropy_with_logits(
        logits, onehot, reduction="none"))


def test_giou_loss_is_torchvision_op():
    from torchvision.ops import generalized_box_iou_loss

    a = torch.tensor([[0.0, 0.0, 10.0, 10.0], [5.0, 5.0, 15.0, 25.0]])
    b = torch.tensor([[2.0, 1.0, 12.0, 9.0], [30.0, 30.0, 40.0, 40.0]])
    loss = MODELS.build(dict(type="GIoULoss", loss_weight=1.0))
    torch.testing.assert_close(loss(a, b, avg_factor=4.0), generalized_box_iou_loss(a, b, reduction="sum") / 4)
    empty = a[:0].clone().requires_grad_()
    zero = loss(empty, b[:0])
    assert zero == 0
    zero.backward()  # an image without positives still back-propagates


def test_anchor_sizes_per_level_are_torchvision_anchors():
    from torchvision.models.detection.anchor_utils import AnchorGenerator as TorchvisionAnchors
    from torchvision.models.detection.image_list import ImageList

    sizes = tuple((x, int(x * 2 ** (1.0 / 3)), int(x * 2 ** (2.0 / 3))) for x in [32, 64, 128, 256, 512])
    tv = TorchvisionAnchors(sizes, ((0.5, 1.0, 2.0),) * 5)
    ours = TASK_UTILS.build(dict(type="AnchorGenerator", sizes=[list(s) for s in sizes], ratios=[0.5, 1.0, 2.0],
                                 strides=[8, 16, 32, 64, 128], round_base_anchors=True, strides_from_image=True))
    grids = [(25, 38), (13, 19), (7, 10), (4, 5), (2, 3)]
    feats = [torch.zeros(1, 1, h, w) for h, w in grids]
    ref = tv(ImageList(torch.zeros(1, 3, 200, 304), [(200, 300)]), feats)[0]
    torch.testing.assert_close(torch.cat(ours.grid_priors(grids, image_size=(200, 304))), ref, rtol=0, atol=0)
    with pytest.raises(ValueError, match="sizes replaces"):
        TASK_UTILS.build(dict(type="AnchorGenerator", sizes=[[8]], scales=[1.0], ratios=[1.0], strides=[8]))


HEAD = dict(
    type="RetinaHead",
    num_classes=3,
    in_channels=[16, 16],
    stacked_convs=2,
    anchor_generator=dict(type="AnchorGenerator", octave_base_scale=4, scales_per_octave=3, ratios=[0.5, 1.0, 2.0],
                          strides=[8, 16]),
    bbox_coder=dict(type="TorchvisionBoxCoder", weights=[1.0, 1.0, 1.0, 1.0]),
    loss_cls=dict(type="FocalLoss", alpha=0.25, gamma=2.0),
    loss_bbox=dict(type="L1Loss"),
    train_cfg=dict(assigner=dict(type="MaxIoUAssigner", pos_iou_thr=0.5, neg_iou_thr=0.4, min_pos_iou=0.0,
                                 match_low_quality=True)),
    test_cfg=dict(score_thr=0.05, nms_pre=50, nms=dict(iou_threshold=0.5), max_per_img=20),
)
BOXES = [[4.0, 6.0, 30.0, 40.0], [20.0, 10.0, 60.0, 50.0], [0.0, 30.0, 64.0, 62.0]]


def _sample(boxes: list) -> DetDataSample:
    s = DetDataSample(metainfo=dict(img_shape=(64, 64), batch_input_shape=(64, 64)))
    s.gt_instances = InstanceData(bboxes=torch.tensor(boxes).reshape(-1, 4), labels=torch.arange(len(boxes)) % 3)
    return s


def test_retina_loss_is_torchvision_loss():
    """One image (torchvision averages per image, MMDetection and we over the batch's positives: the same for
    one image): focal loss over non-ignored anchors and L1 on torchvision-coded deltas of the positives."""
    from torch import nn
    from torchvision.models.detection import _utils as det_utils
    from torchvision.models.detection.retinanet import RetinaNet, RetinaNetHead

    from detection.models.heads.dense_utils import flatten_levels

    torch.manual_seed(0)
    head = MODELS.build(copy.deepcopy(HEAD))
    with torch.no_grad():
        head.classification_head["cls_logits"].weight.mul_(100)
        head.regression_head["bbox_reg"].weight.mul_(100)
    raw = head([torch.randn(1, 16, 8, 8), torch.randn(1, 16, 4, 4)])
    ours = head.loss_by_feat(*raw, [_sample(BOXES)])

    tv = RetinaNet.__new__(RetinaNet)  # only compute_loss: no backbone needed
    nn.Module.__init__(tv)
    tv.proposal_matcher = det_utils.Matcher(0.5, 0.4, allow_low_quality_matches=True)
    tv.head = RetinaNetHead(16, 9, 3)
    anchors = [torch.cat(head.prior_generator.grid_priors([(8, 8), (4, 4)]))]
    outputs = dict(cls_logits=flatten_levels(raw[0], 3), bbox_regression=flatten_levels(raw[1], 4))
    ref = tv.compute_loss([dict(boxes=torch.tensor(BOXES), labels=torch.arange(3) % 3)], outputs, anchors)
    torch.testing.assert_close(ours["loss_cls"], ref["classification"])
    torch.testing.assert_close(ours["loss_bbox"], ref["bbox_regression"])


@pytest.mark.parametrize("loss_bbox", [dict(type="SmoothL1Loss", beta=0.11), dict(type="GIoULoss")])
def test_box_loss_is_selectable(loss_bbox):
    torch.manual_seed(0)
    head = MODELS.build({**copy.deepcopy(HEAD), "loss_bbox": loss_bbox})
    feats = [torch.randn(2, 16, 8, 8, requires_grad=True), torch.randn(2, 16, 4, 4, requires_grad=True)]
    losses = head.loss(feats, [_sample(BOXES), _sample([])])
    assert all(torch.isfinite(v) and v > 0 for v in losses.values())
    sum(losses.values()).backward()
    assert feats[1].grad.abs().sum() > 0


def test_init_and_layout():
    head = MODELS.build(copy.deepcopy(HEAD))
    bias = head.classification_head["cls_logits"].bias
    torch.testing.assert_close(bias.sigmoid(), torch.full_like(bias, 0.01))
    assert head.num_anchors == 9 and head.classification_head["cls_logits"].out_channels == 27
    names = {k for k, _ in head.named_parameters()}
    assert {"classification_head.conv.0.0.weight", "regression_head.conv.1.0.bias", "regression_head.bbox_reg.weight",
            "classification_head.cls_logits.bias"} <= names  # torchvision's RetinaNetHead names
    with pytest.raises(ValueError, match="test_cfg needs exactly"):
        MODELS.build({**copy.deepcopy(HEAD), "test_cfg": dict(score_thr=0.05)})
    with pytest.raises(ValueError, match="strides"):
        MODELS.build({**copy.deepcopy(HEAD), "strides": [8, 32]})


def test_fpn_extra_levels_from_c5_or_p5():
    c = [torch.randn(1, ch, 64 // s, 64 // s) for ch, s in ((8, 4), (16, 8), (32, 16), (64, 32))]
    shapes = {}
    for source in ("on_input", "on_output"):
        fpn = MODELS.build(dict(type="FPN", in_channels=[8, 16, 32, 64], out_channels=16, num_outs=5, start_level=1,
                                add_extra_convs=source, relu_before_extra_convs=source == "on_output"))
        outs = fpn(c)
        assert [o.shape[-1] for o in outs] == [8, 4, 2, 1, 1] and fpn.out_strides == [8, 16, 32, 64, 128]
        shapes[source] = fpn.extra_convs[0][0].in_channels
    assert shapes == {"on_input": 64, "on_output": 16}  # P6 from C5 (MMDetection's RetinaNet) or P5 (torchvision)
