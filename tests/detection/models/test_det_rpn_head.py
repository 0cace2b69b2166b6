"""RPNHead: torchvision's RegionProposalNetwork as the reference for losses and proposals (copied weights),
training on a tiny synthetic case, images without boxes, bf16 autocast, the static (export) path, errors."""

from __future__ import annotations

import copy
import os
from collections import OrderedDict

import pytest
import torch
from mmengine.structures import InstanceData
from torchvision.models.detection.anchor_utils import AnchorGenerator as TVAnchorGenerator
from torchvision.models.detection.image_list import ImageList
from torchvision.models.detection.rpn import RegionProposalNetwork
from torchvision.models.detection.rpn import RPNHead as TVRPNHead
from torchvision.ops import batched_nms, box_iou

from detection.models.heads import RPNHead
from detection.models.heads.rpn_config import anchor_inside_flags
from detection.models.necks import FPN
from detection.registry import MODELS
from detection.structures import DetDataSample
from oars.config import load_config

STRIDES = [4, 8, 16, 32, 64]
SIZE = 64
# torchvision's anchors: rounded base anchors around the cell's corner, strides from the image size.
TV_ANCHORS = dict(type="AnchorGenerator", scales=[8], ratios=[0.5, 1.0, 2.0], round_base_anchors=True,
                  strides_from_image=True)


def _sample(boxes, img_shape=(SIZE, SIZE), scale_factor=(1.0, 1.0)) -> DetDataSample:
    s = DetDataSample(metainfo=dict(img_shape=img_shape, batch_input_shape=(SIZE, SIZE), scale_factor=scale_factor))
    boxes = torch.tensor(boxes, dtype=torch.float32).reshape(-1, 4)
    s.gt_instances = InstanceData(bboxes=boxes, labels=torch.zeros(len(boxes), dtype=torch.long))
    return s


def _feats(batch: int, channels: int = 8, seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, channels, SIZE // s, SIZE // s, generator=g) for s in STRIDES]


# The RPN's arguments as the Faster R-CNN base YAML states them (the head has no defaults in code).
_FASTER = load_config(os.path.join(os.path.dirname(__file__), "..", "..", "..", "configs", "_base_", "models",
                                   "faster_rcnn_r50_fpn.yaml")).to_dict()["model"]


def _rpn_args(**kwargs) -> dict:
    """The base YAML's rpn_head (without type), train_cfg.rpn and test_cfg.rpn; ``train_cfg`` / ``test_cfg`` in
    ``kwargs`` update those sections key by key (None: no train_cfg), other keys replace."""
    args = {k: copy.deepcopy(v) for k, v in _FASTER["rpn_head"].items() if k != "type"}
    args.update(train_cfg=copy.deepcopy(_FASTER["train_cfg"]["rpn"]),
                test_cfg=copy.deepcopy(_FASTER["test_cfg"]["rpn"]))
    for key in ("train_cfg", "test_cfg"):
        if key in kwargs:
            update = kwargs.pop(key)
            args[key] = None if update is None else {**args[key], **update}
    args.update(kwargs)
    return args


def _proposal_cfg(**kwargs) -> dict:
    return {**copy.deepcopy(_FASTER["test_cfg"]["rpn"]), **kwargs}


def _head(**kwargs) -> RPNHead:
    kwargs.setdefault("anchor_generator", dict(TV_ANCHORS))
    return RPNHead(in_channels=[8] * 5, strides=STRIDES, **_rpn_args(**kwargs))


def _torchvision_rpn(head: RPNHead, nms_pre: int, max_per_img: int, batch_size: int, pos_fraction: float):
    tv_head = TVRPNHead(8, 3)
    tv_head.load_state_dict(head.state_dict())  # the same parameter names
    anchors = TVAnchorGenerator(sizes=tuple((8 * s,) for s in STRIDES), aspect_ratios=((0.5, 1.0, 2.0),) * 5)
    return RegionProposalNetwork(anchors, tv_head, fg_iou_thresh=0.7, bg_iou_thresh=0.3,
                                 batch_size_per_image=batch_size, positive_fraction=pos_fraction,
                                 pre_nms_top_n=dict(training=nms_pre, testing=nms_pre),
                                 post_nms_top_n=dict(training=max_per_img, testing=max_per_img), nms_thresh=0.7)


def _spread_weights(head: RPNHead, seed: int = 0) -> None:
    """Weights giving well-separated scores, so that top-k and NMS have no near-ties to break differently, and
    moderate deltas (|dw|, |dh| far below log(1000/16): torchvision clamps them only from above, mmdet both ways)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in head.named_parameters():
            p.copy_(torch.randn(p.shape, generator=g) * (0.03 if name.startswith("bbox_pred") else 0.3))


def test_forward_shapes_and_torchvision_names():
    head = _head()
    cls_scores, bbox_preds = head(_feats(2))
    assert [tuple(c.shape) for c in cls_scores] == [(2, 3, SIZE // s, SIZE // s) for s in STRIDES]
    assert [tuple(b.shape) for b in bbox_preds] == [(2, 12, SIZE // s, SIZE // s) for s in STRIDES]
    TVRPNHead(8, 3).load_state_dict(head.state_dict())  # strict: same names and shapes
    assert head.cls_logits.weight.std() < 0.02 and torch.count_nonzero(head.bbox_pred.bias) == 0


def test_proposals_match_torchvision():
    """Two images of different sizes in one padded batch: top-k per level, decoding, clipping, NMS per level."""
    head = _head(test_cfg=dict(nms_pre=150, max_per_img=60, nms=dict(iou_threshold=0.7), min_bbox_size=1e-3))
    _spread_weights(head)
    shapes = [(SIZE, SIZE), (50, 40)]
    feats = _feats(2)
    rpn = _torchvision_rpn(head, nms_pre=150, max_per_img=60, batch_size=256, pos_fraction=0.5).eval()
    images = ImageList(torch.zeros(2, 3, SIZE, SIZE), shapes)
    with torch.no_grad():
        expected, _ = rpn(images, OrderedDict((str(i), f) for i, f in enumerate(feats)))
    got = head.predict(feats, [_sample([], shape) for shape in shapes])
    for e, o, (h, w) in zip(expected, got, shapes):
        assert len(o) == len(e) == 60
        torch.testing.assert_close(o.bboxes, e)
        assert float(o.bboxes[:, 2].max()) <= w and float(o.bboxes[:, 3].max()) <= h
        assert bool((o.scores[:-1] >= o.scores[1:]).all()) and o.labels.dtype == torch.int64


def test_losses_match_torchvision():
    """With every anchor sampled (a budget above their number, all positives allowed) the sampling is
    deterministic, so the losses must equal torchvision's (sigmoid BCE; smooth L1 with beta 1/9, both over the
    sampled anchors). One image has no boxes."""
    budget = 100_000
    head = _head(loss_bbox=dict(type="SmoothL1Loss", beta=1 / 9),
                 train_cfg=dict(sampler=dict(type="RandomSampler", num=budget, pos_fraction=1.0,
                                             add_gt_as_proposals=False)))
    _spread_weights(head, seed=1)
    gts = [[[14, 18, 46, 50], [40, 0, 60, 44]], []]
    feats = _feats(2, seed=3)
    rpn = _torchvision_rpn(head, nms_pre=100, max_per_img=50, batch_size=budget, pos_fraction=1.0).train()
    targets = [dict(boxes=torch.tensor(g, dtype=torch.float32).reshape(-1, 4)) for g in gts]
    _, tv_losses = rpn(ImageList(torch.zeros(2, 3, SIZE, SIZE), [(SIZE, SIZE)] * 2),
                       OrderedDict((str(i), f) for i, f in enumerate(feats)), targets)
    losses = head.loss(feats, [_sample(g) for g in gts])
    torch.testing.assert_close(losses["loss_rpn_cls"], tv_losses["loss_objectness"])
    torch.testing.assert_close(losses["loss_rpn_bbox"], tv_losses["loss_rpn_box_reg"])
    assert losses["loss_rpn_bbox"] > 0


# ----------------------------------------------------------------------------- training on a synthetic case
FIT_GTS = [[[14, 18, 46, 50], [30, 2, 62, 34]], [[8, 24, 40, 56]]]


def _fit_inputs(channels: int) -> list[torch.Tensor]:
    """'Backbone' maps at strides 4 and 8: noise plus a peak at each gt's centre, so that 20 steps can learn."""
    maps = []
    for stride in (4, 8):
        x = torch.randn(len(FIT_GTS), channels, SIZE // stride, SIZE // stride) * 0.1
        for i, boxes in enumerate(FIT_GTS):
            for x1, y1, x2, y2 in boxes:
                x[i, 0, int((y1 + y2) / 2 / stride), int((x1 + x2) / 2 / stride)] += 3.0
        maps.append(x)
    return maps


def _first_hit_ranks(proposals: list[InstanceData]) -> list[int]:
    """Per gt, the rank (by score) of the first proposal overlapping it by IoU >= 0.7 (1000: none)."""
    ranks = []
    for p, boxes in zip(proposals, FIT_GTS):
        for row in box_iou(torch.tensor(boxes, dtype=torch.float32), p.bboxes):
            hit = torch.nonzero(row >= 0.7).flatten()
            ranks.append(int(hit[0]) if len(hit) else 1000)
    return ranks


def test_fpn_and_rpn_fit_a_tiny_case():
    torch.manual_seed(0)
    fpn = FPN([8, 8], 8, num_outs=5, in_strides=[4, 8])
    head = RPNHead(in_channels=fpn.out_channels, strides=fpn.out_strides, **_rpn_args(
                   anchor_generator=dict(type="AnchorGenerator", scales=[8], ratios=[0.5, 1.0, 2.0]),
                   train_cfg=dict(sampler=dict(type="RandomSampler", num=64, pos_fraction=0.5,
                                               add_gt_as_proposals=False)),
                   test_cfg=dict(nms_pre=1000, max_per_img=100)))
    inputs, samples = _fit_inputs(8), [_sample(g) for g in FIT_GTS]
    with torch.no_grad():
        before = _first_hit_ranks(head.predict(fpn(inputs), samples))
    opt = torch.optim.SGD([*fpn.parameters(), *head.parameters()], lr=0.1, momentum=0.9)
    history = []
    for _ in range(20):
        losses = head.loss(fpn(inputs), samples)
        total = losses["loss_rpn_cls"] + losses["loss_rpn_bbox"]
        assert torch.isfinite(total)
        opt.zero_grad()
        total.backward()
        opt.step()
        history.append(float(total.detach()))
    assert sum(history[-3:]) < 0.8 * sum(history[:3])
    with torch.no_grad():
        after = _first_hit_ranks(head.predict(fpn(inputs), samples))
    # Each gt is found among the first 4 proposals (an image has up to 2 gts; near-duplicates survive NMS 0.7).
    assert max(after) < 4, (before, after)
    assert sum(after) < sum(before)


# ----------------------------------------------------------------------------- edge cases
def test_images_without_boxes():
    head = _head()
    feats = [f.requires_grad_() for f in _feats(2)]
    losses, proposals = head.loss_and_predict(feats, [_sample([]), _sample([])],
                                              _proposal_cfg(nms_pre=50, max_per_img=30))
    assert losses["loss_rpn_bbox"] == 0 and losses["loss_rpn_bbox"].requires_grad
    assert torch.isfinite(losses["loss_rpn_cls"]) and losses["loss_rpn_cls"] > 0
    (losses["loss_rpn_cls"] + losses["loss_rpn_bbox"]).backward()
    assert all(torch.isfinite(p.grad).all() for p in head.parameters())
    assert [len(p) for p in proposals] == [30, 30] and not proposals[0].bboxes.requires_grad

    mixed = head.loss([f.detach() for f in feats], [_sample([[10, 10, 40, 40]]), _sample([])])
    assert mixed["loss_rpn_bbox"] > 0 and torch.isfinite(mixed["loss_rpn_cls"])


def test_bf16_autocast_keeps_losses_and_proposals_fp32():
    head = _head()
    feats = _feats(2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cls_scores, _ = head(feats)
        assert cls_scores[0].dtype == torch.bfloat16  # the convs do run in bf16
        losses, proposals = head.loss_and_predict(feats, [_sample([[10, 10, 40, 40]]), _sample([])])
        static_boxes, static_scores, _ = head.proposals_padded(*head(feats), torch.tensor([[SIZE, SIZE]]).float(),
                                                               (SIZE, SIZE))
    assert all(v.dtype == torch.float32 and torch.isfinite(v) for v in losses.values())
    assert all(p.bboxes.dtype == torch.float32 and p.scores.dtype == torch.float32 for p in proposals)
    assert static_boxes.dtype == static_scores.dtype == torch.float32


def test_padded_proposals_equal_a_per_image_batched_nms_reference():
    """The one (static-shape) proposal path = top-k, small boxes dropped, torchvision's batched_nms per image by
    level, the best max_per_img: a per-image reference written with torchvision's op."""
    cfg = dict(nms_pre=40, max_per_img=25, nms=dict(iou_threshold=0.6), min_bbox_size=12)
    head = _head(test_cfg=cfg)
    _spread_weights(head, seed=2)
    feats = _feats(2, seed=5)
    cls_scores, bbox_preds = head(feats)
    hw = torch.tensor([[SIZE, SIZE]], dtype=torch.float32)
    boxes, scores, levels = head._topk_decode(cls_scores, bbox_preds, 40, hw, (SIZE, SIZE))
    num = sum(min(40, 3 * (SIZE // s) ** 2) for s in STRIDES)
    assert boxes.shape == (2, num, 4) and scores.shape == (2, num) and levels.shape == (num,)
    padded, top, valid = head.proposals_padded(cls_scores, bbox_preds, hw, (SIZE, SIZE))
    assert padded.shape == (2, 25, 4) and top.shape == valid.shape == (2, 25)
    dynamic = head.predict(feats, [_sample([]), _sample([])])
    big = ((boxes[..., 2] - boxes[..., 0]) > 12) & ((boxes[..., 3] - boxes[..., 1]) > 12)
    assert (~big).any()
    for i, result in enumerate(dynamic):
        keep = torch.nonzero(big[i]).flatten()
        kept = batched_nms(boxes[i, keep], scores[i, keep], levels[keep], 0.6)[:25]
        torch.testing.assert_close(result.bboxes, boxes[i, keep][kept])
        torch.testing.assert_close(result.scores, scores[i, keep][kept])
        assert int(valid[i].sum()) == len(result) and torch.equal(padded[i, : len(result)], result.bboxes)
        widths, heights = result.bboxes[:, 2] - result.bboxes[:, 0], result.bboxes[:, 3] - result.bboxes[:, 1]
        assert bool((widths > 12).all() and (heights > 12).all())


def test_rescale_to_original_pixels():
    head = _head(test_cfg=dict(nms_pre=30, max_per_img=10))
    feats = _feats(1)
    plain = head.predict(feats, [_sample([])])[0]
    scaled = head.predict(feats, [_sample([], scale_factor=(2.0, 0.5))], rescale=True)[0]
    torch.testing.assert_close(scaled.bboxes, plain.bboxes / torch.tensor([2.0, 0.5, 2.0, 0.5]))


def test_anchor_inside_flags_by_hand():
    anchors = torch.tensor([[0.0, 0.0, 10.0, 10.0], [-3.0, 0.0, 10.0, 10.0], [0.0, 0.0, 21.0, 10.0],
                            [5.0, 5.0, 15.0, 15.0]])
    valid = torch.tensor([True, True, True, False])
    assert anchor_inside_flags(anchors, valid, (20, 20), -1).tolist() == [True, True, True, False]
    assert anchor_inside_flags(anchors, valid, (20, 20), 0).tolist() == [True, False, False, False]
    assert anchor_inside_flags(anchors, valid, (20, 20), 4).tolist() == [True, True, True, False]


def test_allowed_border_restricts_the_assigned_anchors():
    """allowed_border=0: only anchors inside the image reach the assigner; -1: all anchors of the un-padded
    image (here the second image's padding at x >= 40 is excluded by the anchors' cells)."""
    seen: list[torch.Tensor] = []

    def record(head: RPNHead) -> None:
        assign = head.assigner.assign
        head.assigner.assign = lambda priors, *args: (seen.append(priors), assign(priors, *args))[1]

    loose, strict = _head(), _head(train_cfg=dict(allowed_border=0))
    record(loose)
    record(strict)
    feats, samples = _feats(2), [_sample([[0, 0, 30, 30]]), _sample([[0, 0, 30, 30]], img_shape=(SIZE, 40))]
    loose.loss(feats, samples)
    strict.loss(feats, samples)
    total = sum(3 * (SIZE // s) ** 2 for s in STRIDES)
    assert len(seen[0]) == total and len(seen[1]) < total
    anchors = torch.cat(loose._anchors(loose(feats)[0], (SIZE, SIZE)))
    cells = torch.cat([torch.arange(SIZE // s).repeat_interleave(3).repeat(SIZE // s) * s for s in STRIDES])
    assert len(seen[1]) == int((cells < 40).sum()) and torch.equal(seen[1], anchors[cells < 40])
    for priors, width in ((seen[2], SIZE), (seen[3], 40)):
        assert 0 < len(priors) < total
        assert bool((priors[:, :2] >= 0).all() and (priors[:, 2] < width).all() and (priors[:, 3] < SIZE).all())


def test_config_from_registry_and_errors():
    head = MODELS.build(dict(type="RPNHead", in_channels=8, strides=STRIDES, **_rpn_args(
        feat_channels=16, anchor_generator=dict(type="AnchorGenerator", scales=[8], ratios=[1.0]))))
    assert head.num_anchors == 1 and head.conv[0][0].out_channels == 16
    assert head.prior_generator.strides == STRIDES  # inferred
    with pytest.raises(ValueError, match="in_channels"):
        RPNHead(in_channels=[8, 16], strides=[4, 8], **_rpn_args())
    with pytest.raises(ValueError, match="anchor_generator.strides"):
        RPNHead(in_channels=8, strides=[4, 8], **_rpn_args(anchor_generator=dict(TV_ANCHORS, strides=[8, 16])))
    with pytest.raises(ValueError, match="unknown train_cfg keys \\['pos_iou'\\]"):
        _head(train_cfg=dict(pos_iou=0.7))
    with pytest.raises(ValueError, match="unknown test_cfg keys \\['iou_thr'\\]"):
        _head(test_cfg=dict(iou_thr=0.7))
    with pytest.raises(ValueError, match="nms_pre"):
        _head(test_cfg=dict(nms_pre=0))
    with pytest.raises(ValueError, match=r"test_cfg lacks \['min_bbox_size'\]"):
        RPNHead(in_channels=8, strides=STRIDES, **{**_rpn_args(), "test_cfg": dict(nms_pre=9, max_per_img=9,
                                                                                      nms=dict(iou_threshold=0.7))})
    with pytest.raises(ValueError, match="bbox_coder must be a config dict"):
        _head(bbox_coder=None)
    inference_only = _head(train_cfg=None)
    assert inference_only.assigner is None and len(inference_only.predict(_feats(1), [_sample([])])[0]) > 0
    with pytest.raises(ValueError, match="built without train_cfg"):
        inference_only.loss(_feats(1), [_sample([])])
    with pytest.raises(ValueError, match="use_sigmoid"):
        _head(loss_cls=dict(type="CrossEntropyLoss"))
    with pytest.raises(ValueError, match="add_gt_as_proposals"):
        _head(train_cfg=dict(sampler=dict(type="RandomSampler", num=256, pos_fraction=0.5)))
    with pytest.raises(ValueError, match="got 4 feature maps, built for 5"):
        _head()(_feats(1)[:4])
