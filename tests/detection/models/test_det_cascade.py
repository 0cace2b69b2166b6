"""Cascade (Mask) R-CNN RoI head: MMDetection's defaults, training decreases the loss, refinement drops the added
gt boxes, the two score combinations and the two mask combinations against hand-set stage outputs."""

from __future__ import annotations

import math

import pytest
import torch
from mmengine.structures import InstanceData
from roi_head_cases import (
    CASCADE_RCNN,
    IMG,
    MASK_RCNN,
    STRIDES,
    base,
    data_sample,
    jittered_proposals,
    one_thread,  # noqa: F401  (an autouse fixture)
    pyramid,
    rcnn_cfg,
)

import detection.models  # noqa: F401  (registers everything)
from detection.models.roi_heads import CascadeRoIHead, bbox2roi
from detection.models.task_utils import SamplingResult
from detection.registry import MODELS

NUM_CLASSES = 3
MASK_EXTRACTOR = base(MASK_RCNN, "roi_head", "mask_roi_extractor", drop=("out_channels",))


def _small_heads() -> list[dict]:
    return [dict(cfg, fc_out_channels=32) for cfg in base(CASCADE_RCNN, "roi_head", "bbox_head")]


def _train_cfg(with_mask: bool = False) -> list[dict]:
    extra = dict(mask_size=28) if with_mask else {}
    return [dict(cfg, sampler=dict(type="RandomSampler", num=64, pos_fraction=0.25), **extra)
            for cfg in base(CASCADE_RCNN, "train_cfg", "rcnn")]


def _cascade(with_mask: bool = True, **kwargs) -> CascadeRoIHead:
    cfg = base(CASCADE_RCNN, "roi_head", drop=("_delete_",))
    cfg.update(num_classes=NUM_CLASSES, in_channels=[8] * 5, strides=STRIDES, bbox_head=_small_heads(),
               bbox_roi_extractor=base(CASCADE_RCNN, "roi_head", "bbox_roi_extractor", drop=("out_channels",)),
               train_cfg=_train_cfg(with_mask), test_cfg=rcnn_cfg("test_cfg", with_mask))
    if with_mask:
        cfg.update(mask_roi_extractor=MASK_EXTRACTOR, mask_combination="mean",
                   mask_head=base(MASK_RCNN, "roi_head", "mask_head", conv_out_channels=8))
    cfg.update(kwargs)
    return MODELS.build(cfg)


def _batch():
    samples = [data_sample([[4, 6, 30, 40], [28, 20, 60, 58]], [0, 2]), data_sample([[10, 10, 50, 34]], [1])]
    proposals = [jittered_proposals(s.gt_instances.bboxes, 60, seed=i) for i, s in enumerate(samples)]
    return samples, proposals


def test_base_yaml_is_mmdetection_cascade_rcnn():
    cfg = base(CASCADE_RCNN, "roi_head", drop=("_delete_",), num_classes=80, in_channels=[256] * 5, strides=STRIDES,
               train_cfg=base(CASCADE_RCNN, "train_cfg", "rcnn"), test_cfg=rcnn_cfg("test_cfg", False))
    head = MODELS.build(cfg)
    assert head.num_stages == 3 and head.stage_loss_weights == [1.0, 0.5, 0.25]
    assert [h.bbox_coder.target_stds for h in head.bbox_head] == [
        (0.1, 0.1, 0.2, 0.2), (0.05, 0.05, 0.1, 0.1), (0.033, 0.033, 0.067, 0.067)]
    assert all(h.reg_class_agnostic and h.fc_reg.out_features == 4 for h in head.bbox_head)
    assert [(a.pos_iou_thr, a.neg_range[1], a.min_pos_iou, a.match_low_quality) for a in head.bbox_assigner] == [
        (0.5, 0.5, 0.5, False), (0.6, 0.6, 0.6, False), (0.7, 0.7, 0.7, False)]
    assert head.score_combination == "logits" and head.mask_combination is None and not head.with_mask
    masked = _cascade()
    assert len(masked.mask_head) == 3 and masked.mask_head[0] is not masked.mask_head[1]


def test_cascade_loss_decreases():
    torch.manual_seed(0)
    head = _cascade()
    feats = pyramid(channels=8)
    samples, proposals = _batch()
    opt = torch.optim.SGD(head.parameters(), lr=0.05, momentum=0.9)
    totals = []
    for _ in range(20):
        losses = head.loss(feats, proposals, samples)
        assert set(losses) == {f"s{i}.{k}" for i in range(3) for k in ("loss_cls", "loss_bbox", "acc", "loss_mask")}
        total = sum(v for k, v in losses.items() if "loss" in k)
        assert torch.isfinite(total)
        opt.zero_grad()
        total.backward()
        opt.step()
        totals.append(total.item())
    assert sum(totals[-3:]) / 3 < 0.8 * sum(totals[:3]) / 3, totals


def test_stage_losses_are_weighted():
    torch.manual_seed(0)
    head = _cascade(with_mask=False, stage_loss_weights=[1.0, 0.5, 0.25])
    samples, proposals = _batch()
    feats = pyramid(channels=8)
    torch.manual_seed(1)
    weighted = head.loss(feats, proposals, samples)
    head.stage_loss_weights = [1.0, 1.0, 1.0]
    torch.manual_seed(1)
    plain = head.loss(feats, proposals, samples)
    for stage, w in enumerate([1.0, 0.5, 0.25]):
        torch.testing.assert_close(weighted[f"s{stage}.loss_cls"], w * plain[f"s{stage}.loss_cls"])
        torch.testing.assert_close(weighted[f"s{stage}.acc"], plain[f"s{stage}.acc"])


def test_refine_moves_rois_and_drops_added_gts():
    head = _cascade(with_mask=False)
    bbox_head = head.bbox_head[0]
    gts = torch.tensor([[0.0, 0, 20, 20]])
    priors = torch.cat([gts, torch.tensor([[2.0, 2, 22, 22], [30, 30, 40, 40]])])  # the sampler put the gt first
    res = SamplingResult(priors, torch.tensor([0, 1]), torch.tensor([2]), torch.tensor([0, 0]), gts.repeat(2, 1),
                         torch.tensor([1, 1]), num_gts=1, gt_added=True)
    rois = bbox2roi([torch.cat([res.pos_priors, res.neg_priors])])
    deltas = torch.tensor([[0.0, 0, 0, 0], [1.0, 0, 0, 0], [0, -1.0, 0, 0]])  # x +0.1 w, y -0.1 h (stds 0.1)
    cls = torch.zeros(3, NUM_CLASSES + 1)
    refined = bbox_head.refine_bboxes([res], rois, cls, deltas, torch.tensor([1, 1, NUM_CLASSES]),
                                      [dict(img_shape=(IMG, IMG))])
    torch.testing.assert_close(refined[0].bboxes, torch.tensor([[4.0, 2, 24, 22], [30, 29, 40, 39]]))


def test_zero_gt_image():
    torch.manual_seed(0)
    head = _cascade()
    feats = pyramid(batch=1, channels=8)
    losses = head.loss(feats, [jittered_proposals(torch.zeros((0, 4)), 30)], [data_sample([], [])])
    assert all(torch.isfinite(v) for v in losses.values())
    for stage in range(3):
        for key in ("loss_bbox", "loss_mask"):
            assert losses[f"s{stage}.{key}"].item() == 0 and losses[f"s{stage}.{key}"].requires_grad
    sum(v for k, v in losses.items() if "loss" in k).backward()


STAGE_LOGITS = [[4.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [-4.0, 0.0, 0.0, 0.0]]


def _hand_set(head: CascadeRoIHead, mask_biases: list[float] | None = None) -> None:
    """Stage ``s`` outputs the constant logits ``STAGE_LOGITS[s]`` and zero deltas (mask logits ``mask_biases[s]``)."""
    with torch.no_grad():
        for s, bbox_head in enumerate(head.bbox_head):
            bbox_head.fc_cls.weight.zero_()
            bbox_head.fc_cls.bias.copy_(torch.tensor(STAGE_LOGITS[s]))
            bbox_head.fc_reg.weight.zero_()
            bbox_head.fc_reg.bias.zero_()
        for s, mask_head in enumerate(head.mask_head or []):
            mask_head.conv_logits.weight.zero_()
            mask_head.conv_logits.bias.fill_(mask_biases[s])


def _softmax(x: list[float]) -> list[float]:
    e = [math.exp(v) for v in x]
    return [v / sum(e) for v in e]


@pytest.mark.parametrize("combination", ["logits", "probs"])
def test_score_combination(combination):
    head = _cascade(with_mask=False, score_combination=combination,
                    test_cfg=rcnn_cfg("test_cfg", False, score_thr=0.0)).eval()
    _hand_set(head)
    box = torch.tensor([[8.0, 8, 40, 40]])
    with torch.no_grad():
        res = head.predict(pyramid(batch=1, channels=8), [InstanceData(bboxes=box)], [data_sample([], [])])[0]
    if combination == "logits":  # MMDetection: mean logits [0, 0, 0, 0] -> softmax 0.25 each
        expected = [0.25, 0.25, 0.25]
    else:  # Detectron2: mean of softmax([4,0,0,0]), softmax(0), softmax([-4,0,0,0])
        probs = [_softmax(s) for s in STAGE_LOGITS]
        expected = [sum(p[c] for p in probs) / 3 for c in range(3)]
    assert expected[0] > 0.4 or combination == "logits"
    order = sorted(range(3), key=lambda c: -expected[c])
    assert res.labels.tolist() == order
    torch.testing.assert_close(res.scores, torch.tensor([expected[c] for c in order]))
    torch.testing.assert_close(res.bboxes, box.repeat(3, 1))


@pytest.mark.parametrize("combination", ["mean", "last"])
def test_mask_combination(combination):
    head = _cascade(mask_combination=combination).eval()
    _hand_set(head, mask_biases=[3.0, 3.0, -3.0])  # mean of sigmoids 0.65 (mask), the last one alone 0.05
    box = torch.tensor([[8.0, 8, 40, 40]])
    with torch.no_grad():
        res = head.predict(pyramid(batch=1, channels=8), [InstanceData(bboxes=box)], [data_sample([], [])])[0]
    assert len(res) >= 1 and res.masks.shape[1:] == (IMG, IMG)
    inner = res.masks[:, 10:38, 10:38]
    assert inner.all() if combination == "mean" else not inner.any()


def test_refinement_at_inference_uses_each_stage_regression():
    head = _cascade(with_mask=False, test_cfg=rcnn_cfg("test_cfg", False, score_thr=0.0, max_per_img=1)).eval()
    _hand_set(head)
    with torch.no_grad():
        head.bbox_head[0].fc_reg.bias.copy_(torch.tensor([1.0, 0, 0, 0]))  # stage 0: x + 0.1 w
        head.bbox_head[2].fc_reg.bias.copy_(torch.tensor([0, 1.0 / 0.033 * 0.1, 0, 0]))  # stage 2: y + 0.1 h
    box = torch.tensor([[8.0, 8, 28, 28]])
    with torch.no_grad():
        res = head.predict(pyramid(batch=1, channels=8), [InstanceData(bboxes=box)], [data_sample([], [])])[0]
    torch.testing.assert_close(res.bboxes, torch.tensor([[10.0, 10, 30, 30]]))
    with torch.no_grad():
        scores, bbox_pred, last_rois = head(pyramid(batch=1, channels=8), bbox2roi([box]))
    torch.testing.assert_close(last_rois, torch.tensor([[0.0, 10, 8, 30, 28]]))
    assert scores.shape == (1, NUM_CLASSES + 1) and bbox_pred.shape == (1, 4)


def test_cascade_config_errors():
    with pytest.raises(ValueError, match="one dict per stage"):
        _cascade(train_cfg=_train_cfg()[0])
    with pytest.raises(ValueError, match="score_combination"):
        _cascade(score_combination="max")
    with pytest.raises(ValueError, match="mask_combination=None is invalid with a mask head"):
        _cascade(mask_combination=None)
    with pytest.raises(ValueError, match="bbox_head must be a list"):
        _cascade(bbox_head=None)
    with pytest.raises(ValueError, match="stage_loss_weights"):
        _cascade(stage_loss_weights=[1.0, 0.5])
    with pytest.raises(ValueError, match="2 entries"):
        _cascade(bbox_head=_small_heads()[:2])
