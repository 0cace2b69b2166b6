"""RoI heads: extractor level mapping (MMDetection's rule, torchvision's MultiScaleRoIAlign), box-head targets and
losses on hand-made sampling results, mask targets and pasting against hand-computed cases, the Faster/Mask R-CNN
RoI head (training decreases the loss, zero-gt images, predictions rescaled), the C4 shared head."""

from __future__ import annotations

import math
from collections import OrderedDict

import pytest
import torch
import torch.nn.functional as F
from roi_head_cases import (
    IMG,
    MASK_RCNN,
    STRIDES,
    base,
    bbox_head_args,
    data_sample,
    jittered_proposals,
    mask_head_args,
    one_thread,  # noqa: F401  (an autouse fixture)
    pyramid,
    rcnn_cfg,
)
from torchvision.ops import MultiScaleRoIAlign, roi_align
from torchvision.ops.poolers import LevelMapper

import detection.models  # noqa: F401  (registers everything)
from detection.models.roi_heads import (
    BBoxHead,
    FCNMaskHead,
    ResLayer,
    Shared2FCBBoxHead,
    Shared4Conv1FCBBoxHead,
    SingleRoIExtractor,
    StandardRoIHead,
    bbox2roi,
    mask_targets,
    paste_masks,
)
from detection.models.task_utils import SamplingResult
from detection.registry import MODELS
from oars.errors import DataError
from oars.models.backbones.resnet import ResNet

NUM_CLASSES = 3
ROI_LAYER = base(MASK_RCNN, "roi_head", "bbox_roi_extractor", "roi_layer")  # RoIAlign 7x7, adaptive, aligned
BOX_EXTRACTOR = base(MASK_RCNN, "roi_head", "bbox_roi_extractor", drop=("out_channels",))
MASK_EXTRACTOR = base(MASK_RCNN, "roi_head", "mask_roi_extractor", drop=("out_channels",))
C4_EXTRACTOR = dict(BOX_EXTRACTOR, roi_layer=dict(ROI_LAYER, output_size=14))


def _square(center: float, side: float) -> list[float]:
    return [center - side / 2, center - side / 2, center + side / 2, center + side / 2]


# ----------------------------------------------------------------------------------------------- extractor
def test_mmdet_level_mapping_hand_computed():
    ext = SingleRoIExtractor(8, [4, 8, 16, 32], ROI_LAYER)
    # sqrt(w h): 50 -> log2(50/56) < 0 -> 0; 111 -> 0; 112 -> exactly 1 (the 1e-6 keeps it there); 223 -> 1;
    # 224 -> 2; 448 -> 3; 1000 -> 4.16 clamped to 3; 112 x 448 has scale 224 -> 2.
    boxes = [_square(600, s) for s in (50, 111, 112, 223, 224, 448, 1000)] + [[0, 0, 112, 448]]
    rois = bbox2roi([torch.tensor(boxes)])
    assert ext.map_roi_levels(rois).tolist() == [0, 0, 1, 1, 2, 3, 3, 2]


def test_torchvision_level_mapping_matches_level_mapper():
    ext = SingleRoIExtractor(8, [4, 8, 16, 32], ROI_LAYER, level_mapping="torchvision")
    g = torch.Generator().manual_seed(0)
    xy = torch.rand(200, 2, generator=g) * 500
    boxes = torch.cat([xy, xy + 1 + torch.rand(200, 2, generator=g) * 800], dim=1)
    expected = LevelMapper(2, 5)([boxes])
    assert torch.equal(ext.map_roi_levels(bbox2roi([boxes])), expected)
    hand = [_square(600, s) for s in (50, 112, 224, 448, 1000)]
    assert ext.map_roi_levels(bbox2roi([torch.tensor(hand)])).tolist() == [0, 1, 2, 3, 3]


def test_extractor_pools_each_roi_from_its_level():
    feats = pyramid(batch=2, channels=4)
    ext = SingleRoIExtractor(4, STRIDES[:4], ROI_LAYER, finest_scale=14)  # small, so that 64-px boxes span levels
    boxes = [torch.tensor([[2.0, 3.0, 20.0, 30.0], [0.0, 0.0, 63.0, 60.0]]), torch.tensor([[10.0, 5.0, 50.0, 62.0]])]
    rois = bbox2roi(boxes)
    out = ext(feats, rois)
    assert out.shape == (3, 4, 7, 7) and out.dtype == torch.float32
    for r, level in zip(rois, ext.map_roi_levels(rois).tolist()):
        ref = roi_align(feats[level], r[None], 7, spatial_scale=1 / STRIDES[level], sampling_ratio=0, aligned=True)
        torch.testing.assert_close(out[rois[:, 1:].eq(r[1:]).all(1)], ref)
    assert ext.map_roi_levels(rois).tolist() == [0, 2, 1]


def test_extractor_equals_torchvision_multiscale_roi_align():
    img = 512  # boxes up to ~500 px reach every level of torchvision's mapping (canonical 224 -> level 2)
    feats = pyramid(batch=2, channels=2, img=img)
    g = torch.Generator().manual_seed(1)
    boxes = []
    for _ in range(2):
        xy = torch.rand(60, 2, generator=g) * 200
        boxes.append(torch.cat([xy, xy + 4 + torch.rand(60, 2, generator=g) * 400], dim=1).clamp(max=img))
    boxes[0] = torch.cat([boxes[0], torch.tensor([[0.0, 0, 500, 500], [10, 20, 480, 510]])])  # level 3
    tv = MultiScaleRoIAlign(["0", "1", "2", "3"], output_size=7, sampling_ratio=2)
    expected = tv(OrderedDict((str(i), f) for i, f in enumerate(feats[:4])), boxes, [(img, img)] * 2)
    ours = SingleRoIExtractor(2, STRIDES[:4], level_mapping="torchvision",
                              roi_layer=dict(type="RoIAlign", output_size=7, sampling_ratio=2, aligned=False))
    rois = bbox2roi(boxes)
    assert ours.map_roi_levels(rois).unique().tolist() == [0, 1, 2, 3]
    torch.testing.assert_close(ours(feats, rois), expected)


def test_extractor_runs_in_float32_under_autocast_and_handles_no_rois():
    feats = pyramid(batch=1, channels=4)
    ext = SingleRoIExtractor(4, STRIDES[:4], ROI_LAYER)
    rois = bbox2roi([torch.tensor([[1.0, 2.0, 40.0, 50.0], [3.0, 3.0, 9.0, 9.0]])])
    ref = ext(feats, rois)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = ext(feats, rois)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, ref)
    assert ext(feats, rois[:0]).shape == (0, 4, 7, 7)


def test_extractor_rejects_bad_config():
    with pytest.raises(ValueError, match="level_mapping"):
        SingleRoIExtractor(4, [4, 8], ROI_LAYER, level_mapping="detectron")
    with pytest.raises(ValueError, match="roi_layer.type"):
        SingleRoIExtractor(4, [4, 8], roi_layer=dict(type="DeformRoIPool"))
    with pytest.raises(ValueError, match=r"missing: \['aligned', 'sampling_ratio'\]"):
        SingleRoIExtractor(4, [4, 8], roi_layer=dict(type="RoIAlign", output_size=7))
    with pytest.raises(ValueError, match="increasing"):
        SingleRoIExtractor(4, [8, 4], ROI_LAYER)
    with pytest.raises(ValueError, match="needs 4"):
        SingleRoIExtractor(4, STRIDES[:4], ROI_LAYER)(pyramid(1, 4)[:2], torch.zeros((1, 5)))


# ----------------------------------------------------------------------------------------------- box head
def _hand_sampling() -> list[SamplingResult]:
    """Image 0: two positives (classes 2 and 0) and a negative; image 1: one negative, no gt."""
    priors = torch.tensor([[0.0, 0, 10, 10], [0, 0, 20, 20], [30, 30, 40, 40]])
    gts = torch.tensor([[1.0, 1, 11, 11], [0, 0, 40, 20]])
    r0 = SamplingResult(priors, torch.tensor([0, 1]), torch.tensor([2]), torch.tensor([0, 1]), gts,
                        torch.tensor([2, 0]), num_gts=2, gt_added=False)
    r1 = SamplingResult(torch.tensor([[5.0, 5, 15, 15]]), torch.zeros(0, dtype=torch.long), torch.tensor([0]),
                        torch.zeros(0, dtype=torch.long), torch.zeros((0, 4)), torch.zeros(0, dtype=torch.long),
                        num_gts=0, gt_added=False)
    return [r0, r1]


# (0,0,10,10) -> (1,1,11,11): centre +1 px on a 10 px box = 0.1 -> /0.1 = 1; (0,0,20,20) -> (0,0,40,20): centre
# x +10 on 20 px = 0.5 -> 5, width x2 -> log 2 / 0.2.
HAND_TARGETS = torch.tensor([[1.0, 1.0, 0.0, 0.0], [5.0, 0.0, math.log(2) / 0.2, 0.0], [0, 0, 0, 0], [0, 0, 0, 0]])


def test_bbox_targets_of_hand_made_sampling_results():
    head = Shared2FCBBoxHead(**bbox_head_args(num_classes=NUM_CLASSES, in_channels=4, fc_out_channels=8))
    labels, label_w, targets, target_w = head.get_targets(_hand_sampling())
    assert labels.tolist() == [2, 0, NUM_CLASSES, NUM_CLASSES]
    assert label_w.tolist() == [1, 1, 1, 1]
    torch.testing.assert_close(targets, HAND_TARGETS)
    assert target_w.tolist() == [[1] * 4, [1] * 4, [0] * 4, [0] * 4]
    assert head.get_targets(_hand_sampling(), pos_weight=2.0)[1].tolist() == [2, 2, 1, 1]


def test_bbox_loss_class_specific_against_hand_computation():
    head = Shared2FCBBoxHead(**bbox_head_args(num_classes=NUM_CLASSES, in_channels=4, fc_out_channels=8))
    sampling = _hand_sampling()
    g = torch.Generator().manual_seed(0)
    cls = torch.randn(4, NUM_CLASSES + 1, generator=g, requires_grad=True)
    reg = torch.randn(4, 4 * NUM_CLASSES, generator=g, requires_grad=True)
    rois = bbox2roi([torch.cat([r.pos_priors, r.neg_priors]) for r in sampling])
    losses = head.loss(cls, reg, rois, *head.get_targets(sampling))
    labels = torch.tensor([2, 0, 3, 3])
    torch.testing.assert_close(losses["loss_cls"], F.cross_entropy(cls, labels))
    # L1 over the positives' deltas of their own class, divided by all 4 sampled RoIs (MMDetection).
    hand = ((reg[0, 8:12] - HAND_TARGETS[0]).abs().sum() + (reg[1, 0:4] - HAND_TARGETS[1]).abs().sum()) / 4
    torch.testing.assert_close(losses["loss_bbox"], hand)
    torch.testing.assert_close(losses["acc"], (cls.argmax(1) == labels).float().mean())


def test_bbox_loss_without_positives_is_zero_with_gradient():
    head = Shared2FCBBoxHead(**bbox_head_args(num_classes=NUM_CLASSES, in_channels=4, fc_out_channels=8))
    sampling = _hand_sampling()[1:]
    x = torch.randn(1, 4, 7, 7)
    cls, reg = head(x)
    losses = head.loss(cls, reg, bbox2roi([sampling[0].neg_priors]), *head.get_targets(sampling))
    assert losses["loss_bbox"].item() == 0 and losses["loss_bbox"].requires_grad
    sum(v for k, v in losses.items() if k.startswith("loss")).backward()
    assert torch.isfinite(head.fc_cls.weight.grad).all()


def test_shared2fc_layout_and_init():
    torch.manual_seed(0)
    head = Shared2FCBBoxHead(**base(MASK_RCNN, "roi_head", "bbox_head", drop=("type",), num_classes=80,
                                    in_channels=256))  # the YAML's 1024-d FCs
    shapes = {k: tuple(v.shape) for k, v in head.state_dict().items()}
    assert shapes == {
        "shared_fcs.0.weight": (1024, 256 * 49), "shared_fcs.0.bias": (1024,),
        "shared_fcs.1.weight": (1024, 1024), "shared_fcs.1.bias": (1024,),
        "fc_cls.weight": (81, 1024), "fc_cls.bias": (81,), "fc_reg.weight": (320, 1024), "fc_reg.bias": (320,),
    }
    assert abs(head.fc_cls.weight.std().item() - 0.01) < 1e-3
    assert abs(head.fc_reg.weight.std().item() - 0.001) < 1e-4
    bound = math.sqrt(6 / (256 * 49 + 1024))  # Xavier-uniform
    assert head.shared_fcs[0].weight.abs().max() <= bound and head.shared_fcs[0].weight.abs().max() > 0.9 * bound
    agnostic = Shared2FCBBoxHead(**bbox_head_args(num_classes=80, in_channels=8, fc_out_channels=16,
                                                reg_class_agnostic=True))
    assert agnostic.fc_reg.out_features == 4
    cls, reg = head(torch.randn(3, 256, 7, 7))
    assert cls.shape == (3, 81) and reg.shape == (3, 320)


def test_avg_pool_bbox_head_and_conv_fc_variant():
    head = BBoxHead(**bbox_head_args(num_classes=NUM_CLASSES, in_channels=16, with_avg_pool=True))
    x = torch.randn(2, 16, 7, 7)
    cls, reg = head(x)
    torch.testing.assert_close(cls, head.fc_cls(x.mean(dim=(2, 3))))
    assert reg.shape == (2, 4 * NUM_CLASSES)
    conv = Shared4Conv1FCBBoxHead(**bbox_head_args(num_classes=NUM_CLASSES, in_channels=8, conv_out_channels=8,
                                                   fc_out_channels=16, norm=dict(type="GN", num_groups=4)))
    assert len(conv.shared_convs) == 4 and conv.shared_fcs[0].in_features == 8 * 49
    assert [t.shape for t in conv(torch.randn(2, 8, 7, 7))] == [(2, 4), (2, 12)]
    with pytest.raises(ValueError, match="softmax"):
        BBoxHead(**bbox_head_args(num_classes=2, in_channels=4,
                                  loss_cls=dict(type="CrossEntropyLoss", use_sigmoid=True)))
    with pytest.raises(ValueError, match="bbox_coder must be a config dict"):
        BBoxHead(**bbox_head_args(num_classes=2, in_channels=4, bbox_coder=None))


# ----------------------------------------------------------------------------------------------- masks
def test_mask_targets_hand_computed_crops():
    gt = torch.zeros((2, 32, 32), dtype=torch.uint8)
    gt[0, 8:24, 8:24] = 1  # never used below: the RoIs are assigned to gt 1
    gt[1, 0:16, 8:24] = 1
    # RoI (0,0,16,16) in 4x4 bins of 4x4 px: x bins [0,4) [4,8) are outside gt 1's columns 8..23, y all inside.
    # RoI (5,0,21,16): x bins [5,9) holds 1 of 4 mask columns (0.25 -> 0), [9,13) [13,17) [17,21) are full.
    # RoI (7,16,23,32): rows 16..31 are outside gt 1 -> all 0 (gt 0 would give ones in rows 16..23).
    rois = torch.tensor([[0.0, 0, 16, 16], [5, 0, 21, 16], [7, 16, 23, 32]])
    out = mask_targets(rois, torch.tensor([1, 1, 1]), gt, 4)
    expected = torch.zeros((3, 4, 4))
    expected[0, :, 2:] = 1
    expected[1, :, 1:] = 1
    torch.testing.assert_close(out, expected)
    # A bin 3/4 inside (x 7..10 with mask from 8) counts: the average 0.75 >= 0.5.
    assert mask_targets(torch.tensor([[7.0, 0, 11, 4]]), torch.tensor([1]), gt, 1).item() == 1.0
    assert mask_targets(rois[:0], torch.zeros(0, dtype=torch.long), gt, 28).shape == (0, 28, 28)


def test_mask_loss_is_bce_of_the_gt_class_channel():
    head = FCNMaskHead(**mask_head_args(num_classes=NUM_CLASSES, in_channels=4, conv_out_channels=4))
    logits = torch.randn(2, NUM_CLASSES, 28, 28, requires_grad=True)
    targets = (torch.rand(2, 28, 28) > 0.5).float()
    labels = torch.tensor([2, 0])
    loss = head.loss(logits, targets, labels)["loss_mask"]
    ref = F.binary_cross_entropy_with_logits(torch.stack([logits[0, 2], logits[1, 0]]), targets)
    torch.testing.assert_close(loss, ref)
    empty = head.loss(logits[:0], targets[:0], labels[:0])["loss_mask"]
    assert empty.item() == 0 and empty.requires_grad


def test_fcn_mask_head_layout():
    head = FCNMaskHead(**mask_head_args(num_classes=80, in_channels=256))  # the YAML's 4 x 256
    shapes = {k: tuple(v.shape) for k, v in head.state_dict().items()}
    assert shapes["convs.3.0.weight"] == (256, 256, 3, 3) and shapes["upsample.weight"] == (256, 256, 2, 2)
    assert shapes["conv_logits.weight"] == (80, 256, 1, 1) and len(shapes) == 4 * 2 + 2 + 2
    assert head(torch.randn(2, 256, 14, 14)).shape == (2, 80, 28, 28)


def test_paste_full_image_box_reproduces_the_upsampled_mask():
    g = torch.Generator().manual_seed(0)
    mask = torch.rand(1, 28, 28, generator=g)
    h, w = 84, 56  # 3x and 2x
    pasted = paste_masks(mask, torch.tensor([[0.0, 0.0, w, h]]), (h, w), threshold=None)[0]
    up = F.interpolate(mask[None], size=(h, w), mode="bilinear", align_corners=False)[0, 0]
    # Equal wherever the bilinear sample lies inside the mask; the outermost half mask-pixel fades to the zero
    # padding instead of repeating the border (MMDetection / Detectron2's paste).
    torch.testing.assert_close(pasted[1:-1, 1:-1], up[1:-1, 1:-1])
    assert (pasted[0] < up[0]).all()


def test_paste_hand_computed_2x2_into_4x4():
    mask = torch.tensor([[[1.0, 0.0], [0.0, 0.0]]])
    pasted = paste_masks(mask, torch.tensor([[0.0, 0.0, 4.0, 4.0]]), (4, 4), threshold=None)[0]
    # Pixel centres 0.5, 1.5, 2.5, 3.5 sample mask coordinates -0.25, 0.25, 0.75, 1.25 -> weights of mask pixel
    # 0: 0.75, 0.75, 0.25, 0 (outside it: the zero padding).
    profile = torch.tensor([0.75, 0.75, 0.25, 0.0])
    torch.testing.assert_close(pasted, profile[:, None] * profile[None, :])
    shifted = paste_masks(mask, torch.tensor([[2.0, 2.0, 6.0, 6.0]]), (8, 8), threshold=None)[0]
    torch.testing.assert_close(shifted[2:6, 2:6], pasted)
    assert shifted.sum() == pasted.sum()
    assert paste_masks(mask, torch.tensor([[0.0, 0.0, 4.0, 4.0]]), (4, 4))[0].tolist() == (
        (profile[:, None] * profile[None, :]) >= 0.5).tolist()


def _paste_reference(mask: torch.Tensor, box: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """One mask sampled by grid_sample on a whole-image grid (MMDetection's GPU paste), 0 outside the box."""
    gy = (torch.arange(h) + 0.5 - box[1]) / (box[3] - box[1]) * 2 - 1
    gx = (torch.arange(w) + 0.5 - box[0]) / (box[2] - box[0]) * 2 - 1
    grid = torch.stack([gx[None, :].expand(h, w), gy[:, None].expand(h, w)], dim=-1)[None]
    sampled = F.grid_sample(mask[None, None], grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    return torch.where((gy.abs() <= 1)[:, None] & (gx.abs() <= 1)[None, :], sampled[0, 0], 0.0)


def test_paste_equals_whole_image_grid_sample():
    g = torch.Generator().manual_seed(0)
    masks = torch.rand(11, 28, 28, generator=g)
    xy = torch.rand(11, 2, generator=g) * 60 - 5
    boxes = torch.cat([xy, xy + 3 + torch.rand(11, 2, generator=g) * 40], dim=1)  # some leave the image
    boxes[3, 2] = boxes[3, 0]  # zero width
    ref = torch.stack([_paste_reference(m, b, 60, 70) for m, b in zip(masks, boxes)])
    probs = paste_masks(masks, boxes, (60, 70), threshold=None)
    torch.testing.assert_close(probs, ref, rtol=0, atol=1e-6)
    one = paste_masks(masks, boxes, (60, 70))
    assert one.dtype == torch.bool and one.shape == (11, 60, 70) and torch.equal(one, probs >= 0.5)
    assert not one[3].any()
    assert paste_masks(masks[:0], boxes[:0], (60, 70)).shape == (0, 60, 70)


# ----------------------------------------------------------------------------------------------- RoI head
def _roi_head(with_mask: bool = True, **kwargs) -> StandardRoIHead:
    cfg = dict(type="StandardRoIHead", num_classes=NUM_CLASSES, in_channels=[8] * 5, strides=STRIDES,
               bbox_roi_extractor=BOX_EXTRACTOR, bbox_head=base(MASK_RCNN, "roi_head", "bbox_head", fc_out_channels=32),
               test_cfg=rcnn_cfg("test_cfg", with_mask),
               train_cfg=rcnn_cfg("train_cfg", with_mask,
                                  sampler=dict(type="RandomSampler", num=64, pos_fraction=0.25)))
    if with_mask:
        cfg.update(mask_roi_extractor=MASK_EXTRACTOR,
                   mask_head=base(MASK_RCNN, "roi_head", "mask_head", conv_out_channels=8))
    cfg.update(kwargs)
    return MODELS.build(cfg)


def _batch(with_mask: bool = True):
    samples = [data_sample([[4, 6, 30, 40], [28, 20, 60, 58]], [0, 2], with_mask=with_mask),
               data_sample([[10, 10, 50, 34]], [1], with_mask=with_mask)]
    proposals = [jittered_proposals(s.gt_instances.bboxes, 60, seed=i) for i, s in enumerate(samples)]
    return samples, proposals


def test_standard_roi_head_builds_mmdet_values_from_the_base_yaml():
    cfg = base(MASK_RCNN, "roi_head", drop=("mask_roi_extractor", "mask_head"), num_classes=80, in_channels=[256] * 5,
               strides=STRIDES, train_cfg=rcnn_cfg("train_cfg", False), test_cfg=rcnn_cfg("test_cfg", False))
    head = MODELS.build(cfg)
    assert head.bbox_roi_extractor.featmap_strides == [4, 8, 16, 32]  # P6 only serves the RPN
    assert head.bbox_roi_extractor.roi_layer == dict(type="RoIAlign", output_size=(7, 7), sampling_ratio=0,
                                                     aligned=True)
    assert isinstance(head.bbox_head, Shared2FCBBoxHead) and head.bbox_head.shared_fcs[0].in_features == 256 * 49
    a, s = head.bbox_assigner, head.bbox_sampler
    assert (a.pos_iou_thr, a.neg_range, a.min_pos_iou, a.match_low_quality) == (0.5, (0.0, 0.5), 0.5, False)
    assert (s.num, s.pos_fraction, s.add_gt_as_proposals) == (512, 0.25, True)
    assert head.test_cfg == dict(score_thr=0.05, nms=dict(iou_threshold=0.5), max_per_img=100, nms_pre=10000,
                                 mask_thr_binary=None, min_bbox_size=0.0)
    assert not head.with_mask
    inference_only = MODELS.build(dict(cfg, train_cfg=None))
    assert inference_only.bbox_assigner is None
    samples, proposals = _batch(with_mask=False)
    with pytest.raises(ValueError, match="built without train_cfg"):
        inference_only.loss(pyramid(channels=256), proposals, samples)


def test_standard_roi_head_loss_decreases():
    torch.manual_seed(0)
    head = _roi_head()
    feats = pyramid(channels=8)
    samples, proposals = _batch()
    opt = torch.optim.SGD(head.parameters(), lr=0.05, momentum=0.9)
    totals = []
    for _ in range(20):
        losses = head.loss(feats, proposals, samples)
        assert set(losses) == {"loss_cls", "loss_bbox", "acc", "loss_mask"}
        total = sum(v for k, v in losses.items() if k.startswith("loss"))
        assert torch.isfinite(total)
        opt.zero_grad()
        total.backward()
        opt.step()
        totals.append(total.item())
    assert sum(totals[-3:]) / 3 < 0.8 * sum(totals[:3]) / 3, totals


def test_zero_gt_images_give_finite_losses_with_gradient():
    torch.manual_seed(0)
    head = _roi_head()
    feats = [f.requires_grad_() for f in pyramid(channels=8)]
    empty = data_sample([], [])
    samples = [empty, data_sample([[10, 10, 50, 34]], [1])]
    proposals = [jittered_proposals(torch.zeros((0, 4)), 30), jittered_proposals(samples[1].gt_instances.bboxes, 30)]
    losses = head.loss(feats, proposals, samples)
    assert all(torch.isfinite(v) for v in losses.values())
    only_empty = head.loss(feats, proposals[:1], samples[:1])
    for key in ("loss_bbox", "loss_mask"):
        assert only_empty[key].item() == 0 and only_empty[key].requires_grad
    sum(v for k, v in only_empty.items() if k.startswith("loss")).backward()
    assert torch.isfinite(head.bbox_head.fc_cls.weight.grad).all()


def _hand_set(head: StandardRoIHead, cls_bias: list[float], mask_bias: float | None = None) -> None:
    """Predictions independent of the input: constant class logits, zero box deltas, constant mask logits."""
    with torch.no_grad():
        head.bbox_head.fc_cls.weight.zero_()
        head.bbox_head.fc_cls.bias.copy_(torch.tensor(cls_bias))
        head.bbox_head.fc_reg.weight.zero_()
        head.bbox_head.fc_reg.bias.zero_()
        if mask_bias is not None:
            head.mask_head.conv_logits.weight.zero_()
            head.mask_head.conv_logits.bias.fill_(mask_bias)


PROPOSALS = torch.tensor([[4.0, 4, 20, 20], [5, 5, 21, 21], [30, 30, 50, 60], [-5, 40, 30, 70]])


def test_predict_decodes_clips_suppresses_and_rescales():
    from mmengine.structures import InstanceData

    head = _roi_head(with_mask=False).eval()
    _hand_set(head, [0.0, 5.0, 0.0, 0.0])  # class 1 wins with softmax e^5 / (e^5 + 3); others < 0.05
    sample = data_sample([], [], scale=0.5)  # original image 128 x 128
    props = [InstanceData(bboxes=PROPOSALS)]
    with torch.no_grad():
        res = head.predict(pyramid(batch=1, channels=8), props, [sample])[0]
        raw = head.predict(pyramid(batch=1, channels=8), props, [sample], rescale=False)[0]
    # Proposal 1 overlaps proposal 0 (IoU 0.79) and is suppressed; proposal 3 is clipped to the image first.
    expected = torch.tensor([[4.0, 4, 20, 20], [30, 30, 50, 60], [0, 40, 30, 64]])
    score = math.exp(5) / (math.exp(5) + 3)
    torch.testing.assert_close(raw.bboxes, expected)
    torch.testing.assert_close(res.bboxes, expected * 2)
    torch.testing.assert_close(res.scores, torch.full((3,), score))
    assert res.labels.tolist() == [1, 1, 1]


def test_predict_masks_in_original_pixels():
    from mmengine.structures import InstanceData

    head = _roi_head().eval()
    _hand_set(head, [0.0, 5.0, 0.0, 0.0], mask_bias=6.0)
    sample = data_sample([], [], scale=0.5)
    with torch.no_grad():
        res = head.predict(pyramid(batch=1, channels=8), [InstanceData(bboxes=PROPOSALS[2:3])], [sample])[0]
        raw = head.predict(pyramid(batch=1, channels=8), [InstanceData(bboxes=PROPOSALS[2:3])], [sample],
                           rescale=False)[0]
    assert res.masks.shape == (1, 128, 128) and res.masks.dtype == torch.bool
    assert raw.masks.shape == (1, IMG, IMG)
    torch.testing.assert_close(res.bboxes, PROPOSALS[2:3] * 2)
    x1, y1, x2, y2 = (PROPOSALS[2] * 2).long().tolist()
    inside = torch.zeros((128, 128), dtype=torch.bool)
    inside[y1:y2, x1:x2] = True
    assert res.masks[0][y1 + 1 : y2 - 1, x1 + 1 : x2 - 1].all() and not res.masks[0][~inside].any()


def test_predict_without_proposals_and_tensor_mode():
    from mmengine.structures import InstanceData

    head = _roi_head().eval()
    feats = pyramid(batch=2, channels=8)
    samples = [data_sample([], []), data_sample([], [], scale=2.0)]
    props = [InstanceData(bboxes=torch.zeros((0, 4))), InstanceData(bboxes=PROPOSALS)]
    with torch.no_grad():
        res = head.predict(feats, props, samples)
        outs = head(feats, bbox2roi([PROPOSALS]))
        none = head.predict(feats, props[:1], samples[:1])
    assert len(res[0]) == 0 and res[0].masks.shape == (0, IMG, IMG)
    assert res[1].masks.shape[1:] == (32, 32)
    assert len(none[0]) == 0 and none[0].masks.shape == (0, IMG, IMG)
    assert [tuple(t.shape) for t in outs] == [(4, 4), (4, 12), (4, NUM_CLASSES, 28, 28)]


def test_roi_head_config_errors():
    with pytest.raises(ValueError, match="unknown keys"):
        _roi_head(test_cfg=dict(iou_thr=0.5))
    with pytest.raises(ValueError, match=r"lacks \['nms_pre'\]"):
        _roi_head(test_cfg=base(MASK_RCNN, "test_cfg", "rcnn", drop=("nms_pre",)))
    with pytest.raises(ValueError, match="mask_size=14"):
        _roi_head(train_cfg=rcnn_cfg("train_cfg", mask_size=14))
    with pytest.raises(ValueError, match="mask_thr_binary"):
        _roi_head(test_cfg=rcnn_cfg("test_cfg", False))
    with pytest.raises(ValueError, match="bbox_roi_extractor must be a config dict"):
        _roi_head(bbox_roi_extractor=None)
    with pytest.raises(ValueError, match="num_classes"):
        _roi_head(bbox_head=base(MASK_RCNN, "roi_head", "bbox_head", num_classes=5))
    samples, proposals = _batch()
    samples[1].gt_instances.labels[0] = NUM_CLASSES
    with pytest.raises(DataError, match=r"gt labels must be in \[0, 2\].*sample 1"):
        _roi_head().loss(pyramid(channels=8), proposals, samples)
    with pytest.raises(ValueError, match="same channels"):
        _roi_head(with_mask=False, in_channels=[8, 16, 8, 8], strides=STRIDES[:4])


# ----------------------------------------------------------------------------------------------- C4 shared head
def test_res_layer_is_resnet50_layer4_and_loads_its_weights(tmp_path):
    import torchvision

    with torch.device("meta"):
        tv = torchvision.models.resnet50()
        res5 = ResLayer(depth=50)
    # FrozenBN has BN's keys but num_batches_tracked (which torchvision's BN checkpoints carry and loading drops).
    tv_keys = {k: v.shape for k, v in tv.state_dict().items()
               if k.startswith("layer4.") and not k.endswith("num_batches_tracked")}
    assert {k: v.shape for k, v in res5.state_dict().items()} == tv_keys
    assert res5.in_channels == 1024 and res5.out_channels == 2048

    # Loading: a narrow ResNet-50 (base 8) checkpoint; layer4 keys land here, the rest is skipped.
    torch.manual_seed(0)
    backbone = ResNet(depth=50, base_channels=8, norm="FrozenBN").eval()
    with torch.no_grad():
        for name, buf in backbone.named_buffers():
            if name.endswith(("running_mean", "running_var")):
                buf.uniform_(0.5, 1.5)
    path = tmp_path / "r50.pth"
    torch.save(backbone.state_dict(), path)
    head = ResLayer(depth=50, base_channels=8, in_channels=128, init=dict(checkpoint=str(path))).train()
    before = head(torch.ones(1, 128, 14, 14))
    head.init_weights()
    x = torch.randn(2, 128, 14, 14)
    out = head(x)
    assert out.shape == (2, 256, 7, 7)
    torch.testing.assert_close(out, backbone.layer4(x))
    assert not torch.allclose(before, head(torch.ones(1, 128, 14, 14)))
    # The RoI head's init_weights reaches its shared head (mmengine's BaseModule.init_weights stops at the head).
    roi_head = MODELS.build(dict(
        type="StandardRoIHead", num_classes=NUM_CLASSES, in_channels=[128], strides=[16],
        bbox_roi_extractor=C4_EXTRACTOR, test_cfg=rcnn_cfg("test_cfg", False),
        shared_head=dict(type="ResLayer", depth=50, base_channels=8, init=dict(checkpoint=str(path))),
        bbox_head=dict(bbox_head_args(with_avg_pool=True), type="BBoxHead")))
    roi_head.init_weights()
    torch.testing.assert_close(roi_head.shared_head(x), backbone.layer4(x))
    with pytest.raises(ValueError, match="takes 1024"):
        ResLayer(depth=50, in_channels=256)


def test_c4_roi_head_with_shared_res5():
    torch.manual_seed(0)
    head = MODELS.build(dict(
        type="StandardRoIHead", num_classes=NUM_CLASSES, in_channels=[32], strides=[16],
        bbox_roi_extractor=C4_EXTRACTOR, test_cfg=rcnn_cfg("test_cfg"),
        shared_head=dict(type="ResLayer", depth=18, base_channels=8),
        bbox_head=dict(bbox_head_args(with_avg_pool=True), type="BBoxHead"),
        mask_head=base(MASK_RCNN, "roi_head", "mask_head", num_convs=0, conv_out_channels=8),
        train_cfg=rcnn_cfg("train_cfg", sampler=dict(type="RandomSampler", num=32, pos_fraction=0.25), mask_size=14),
    ))
    assert head.share_roi_extractor and head.bbox_head.in_channels == 64 and head.mask_head.mask_size == 14
    feats = [torch.randn(2, 32, 4, 4)]
    samples, proposals = _batch()
    losses = head.loss(feats, proposals, samples)
    assert set(losses) == {"loss_cls", "loss_bbox", "acc", "loss_mask"}
    sum(v for k, v in losses.items() if k.startswith("loss")).backward()
    head.eval()
    with torch.no_grad():
        res = head.predict(feats, proposals, samples)
    assert res[0].masks.shape[1:] == (IMG, IMG) and len(res[0]) == len(res[0].masks)


# ----------------------------------------------------------------------------------------------- torchvision weights
def test_torchvision_roi_head_weights_give_torchvision_outputs():
    from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
    from torchvision.models.detection.mask_rcnn import MaskRCNNHeads, MaskRCNNPredictor

    from detection.models.roi_heads import roi_head_from_torchvision

    torch.manual_seed(0)
    box_head, box_pred = TwoMLPHead(8 * 49, 32), FastRCNNPredictor(32, NUM_CLASSES + 1)
    mask_head, mask_pred = MaskRCNNHeads(8, [8, 8, 8, 8], 1), MaskRCNNPredictor(8, 8, NUM_CLASSES + 1)
    state = {f"roi_heads.{name}.{k}": v for name, mod in
             [("box_head", box_head), ("box_predictor", box_pred), ("mask_head", mask_head),
              ("mask_predictor", mask_pred)] for k, v in mod.state_dict().items()}
    state["backbone.body.conv1.weight"] = torch.zeros(1)  # not the RoI head's: dropped
    ours = _roi_head()
    ours.load_state_dict(roi_head_from_torchvision(state), strict=True)
    x, xm = torch.randn(5, 8, 7, 7), torch.randn(5, 8, 14, 14)
    tv_cls, tv_reg = box_pred(box_head(x))
    cls, reg = ours.bbox_head(x)
    torch.testing.assert_close(cls, torch.cat([tv_cls[:, 1:], tv_cls[:, :1]], dim=1))  # background last
    torch.testing.assert_close(reg, tv_reg[:, 4:])
    torch.testing.assert_close(ours.mask_head(xm), mask_pred(mask_head(xm))[:, 1:])
    with pytest.raises(ValueError, match="no RoI-head key"):
        roi_head_from_torchvision({"backbone.fpn.x": torch.zeros(1)})
