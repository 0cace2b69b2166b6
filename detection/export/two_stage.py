"""The exported graph of two-stage detectors (Faster / Mask / Cascade R-CNN), designed for static shapes.

torchvision's and our eager two-stage paths do not trace (per-image Python loops, ``nonzero``-sized tensors,
``batched_nms``); this graph reuses the detector's submodules (backbone, neck, RPN convs and coder, RoI
extractors' level rule, box / mask heads and their coders) and reproduces ``model.predict(rescale=False)``
on an input of the exported size with shapes that depend on that size only (the batch may be dynamic):

1. RPN: :meth:`RPNHead.proposals_static` (``test_cfg.rpn.nms_pre`` best anchors per level, decoded, clipped
   to the input, boxes not above ``min_bbox_size`` scored 0), then NMS per level as ONE ONNX
   ``NonMaxSuppression`` with the levels as its classes (scores ``[B, L, P]``, 0 outside the level: exact
   per-level NMS without the coordinate offset trick), the ``max_per_img`` best kept: ``K`` proposals per
   image, those NMS removed marked invalid (their detections get score 0).
2. RoI features: ONNX ``RoiAlign`` once per pyramid level on every RoI, where RoIs of other levels are replaced
   by an empty box (one bilinear sample per bin: cheap), and each RoI takes its own level's result
   (``where`` on the extractor's ``map_roi_levels``): the same numbers as the eager per-level loop.
3. Box head (Cascade: every stage, refining the RoIs with its best foreground class's regression, clipped to
   the input; scores combined as the head's ``score_combination``), softmax, class-specific (or agnostic) boxes
   decoded and clipped to the input (with ``test_cfg.rcnn.min_bbox_size``, smaller boxes scored 0).
4. Per-class NMS as ONE ``NonMaxSuppression`` over ``B * C`` "batches" (one per image and class: each class's
   own boxes, no offsets), ``test_cfg.rcnn`` ``score_thr``, ``nms_pre`` and ``max_per_img``; the kept pairs'
   ``max_per_img`` best fill the padded outputs.
5. Masks (mask models): the mask head (Cascade: the mean of the stages' probabilities, or the last stage's) on
   the detections' boxes, the label's channel, sigmoid: ``masks [B, M, 28, 28]`` probabilities, pasted into the
   original image by the predictor (``oars_deploy.mask_paste``, the same sampling as
   ``detection.models.roi_heads.mask_paste``).

Outputs: ``num_dets [B]`` int64, ``boxes [B, M, 4]`` (input pixels), ``scores [B, M]``, ``labels [B, M]``
int64 (``LABEL_PAD`` in padding rows) [, ``masks [B, M, Hm, Wm]``], rows by decreasing score.
Known difference from ``model.predict``: boxes are clipped to the input, not to each image's un-padded
``img_shape`` (the graph has one input; a letterboxed image's boxes may reach into the padding, where the
predictor clips them to the original image).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import nms_op  # noqa: F401  (registers torch.ops.oars.nms and torch.ops.oars.roi_align)
from .module import LABEL_PAD


def _as_list(x: Any) -> list:
    return list(x) if isinstance(x, (list, tuple, nn.ModuleList)) else [x]


def clip_boxes(boxes: Tensor, hw: tuple[int, int]) -> Tensor:
    """``[..., 4]`` xyxy boxes clipped to ``[0, W] x [0, H]``: the box coder's ``max_shape`` clipping, with float
    bounds only (torch 2.14's ONNX type promotion fails on ``clamp(0, 128.0)``, an int and a float bound)."""
    h, w = float(hw[0]), float(hw[1])
    return torch.stack([boxes[..., 0].clamp(0.0, w), boxes[..., 1].clamp(0.0, h),
                        boxes[..., 2].clamp(0.0, w), boxes[..., 3].clamp(0.0, h)], dim=-1)


def _decode(head: nn.Module, priors: Tensor, deltas: Tensor, hw: tuple[int, int]) -> Tensor:
    """``head.bbox_coder.decode(priors, deltas, max_shape=hw)`` (clipped when the coder clips)."""
    boxes = head.bbox_coder.decode(priors, deltas, max_shape=None)
    return clip_boxes(boxes, hw) if getattr(head.bbox_coder, "clip_border", True) else boxes


class LevelRoIAlign(nn.Module):
    """A ``SingleRoIExtractor`` (RoIAlign) as static-shape tensor ops: boxes ``[R, 4]`` + image indices ``[R]``
    -> ``[R, C, h, w]`` float32, each RoI pooled from the level ``extractor.map_roi_levels`` gives it."""

    def __init__(self, extractor: nn.Module) -> None:
        super().__init__()
        layer = extractor.roi_layer
        if layer["type"] != "RoIAlign":
            raise ValueError(f"two-stage export: roi_layer.type={layer['type']!r} has no static ONNX form here; "
                             "export supports RoIAlign extractors")
        self.extractor = extractor
        self.output_size = tuple(int(s) for s in layer["output_size"])
        self.sampling_ratio = int(layer["sampling_ratio"])
        self.aligned = bool(layer["aligned"])
        self.scales = [1.0 / float(s) for s in extractor.featmap_strides]

    def _align(self, feat: Tensor, boxes: Tensor, batch_idx: Tensor, scale: float) -> Tensor:
        return torch.ops.oars.roi_align(feat.float(), boxes, batch_idx, self.output_size[0], self.output_size[1],
                                        scale, self.sampling_ratio, self.aligned)

    def forward(self, feats: Sequence[Tensor], boxes: Tensor, batch_idx: Tensor) -> Tensor:
        boxes = boxes.float()
        if len(self.scales) == 1:
            return self._align(feats[0], boxes, batch_idx, self.scales[0])
        levels = self.extractor.map_roi_levels(boxes)
        out = None
        for level, scale in enumerate(self.scales):
            mine = levels == level
            # Other levels' RoIs become empty boxes: one sample per bin instead of an adaptive grid.
            pooled = self._align(feats[level], torch.where(mine[:, None], boxes, torch.zeros_like(boxes)),
                                 batch_idx, scale)
            mine = mine[:, None, None, None]
            out = torch.where(mine, pooled, torch.zeros_like(pooled) if out is None else out)
        return out


def static_proposals(rpn_head: nn.Module, feats: Sequence[Tensor], hw: tuple[int, int]) -> tuple[Tensor, Tensor]:
    """The RPN's proposals with static shapes (step 1 of the module docstring).

    Args:
        rpn_head: the detector's ``RPNHead`` (its ``test_cfg``: nms_pre, max_per_img, nms.iou_threshold,
            min_bbox_size).
        feats: the neck's maps ``[B, C, H_l, W_l]``.
        hw: the input's (H, W): boxes are clipped to it.

    Returns:
        boxes ``[B, K, 4]`` float32 and ``valid`` ``[B, K]`` bool (False: a row NMS removed, or that a level never
        filled), ``K = min(max_per_img, P)``, ``P = sum_l min(nms_pre, H_l * W_l * A)``; valid rows by decreasing
        score, as :meth:`RPNHead.predict_by_feat` returns them.
    """
    cls_scores, bbox_preds = rpn_head(feats)
    boxes, scores, levels = rpn_head.proposals_static(cls_scores, bbox_preds, hw, with_level_ids=True)
    cfg = rpn_head.test_cfg
    num_levels = len(cls_scores)
    per_level = [min(int(cfg["nms_pre"]), int(c.shape[1] * c.shape[2] * c.shape[3])) for c in cls_scores]
    level_ids = torch.arange(num_levels, device=levels.device)
    in_level = (levels[None, :] == level_ids[:, None])[None]  # [1, L, P]
    level_scores = torch.where(in_level, scores[:, None, :], torch.zeros_like(scores[:, None, :]))  # [B, L, P]
    max_out = min(int(cfg["max_per_img"]), max(per_level))
    # score > 0: boxes proposals_static zeroed (not above min_bbox_size) take no part, as eagerly removed.
    selected = torch.ops.oars.nms(boxes, level_scores, max_out, float(cfg["nms"]["iou_threshold"]), 0.0)
    kept = torch.zeros_like(level_scores).index_put(
        (selected[:, 0], selected[:, 1], selected[:, 2]), torch.ones_like(selected[:, 0], dtype=scores.dtype)
    ).sum(dim=1)  # [B, P]: each column belongs to one level
    k = min(int(cfg["max_per_img"]), scores.shape[1])
    top, idx = (scores * kept).topk(k, dim=1)
    return boxes.gather(1, idx[..., None].expand(-1, -1, 4)), top > 0


def multiclass_nms_static(boxes: Tensor, probs: Tensor, score_thr: float, iou_threshold: float, max_per_img: int,
                          nms_pre: int | None) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Per-class NMS of class-specific boxes with static shapes (step 4 of the module docstring).

    Args:
        boxes: ``[B, K, C, 4]`` (or ``[B, K, 1, 4]``, class-agnostic) float32 boxes per RoI and class.
        probs: ``[B, K, C]`` float32 foreground probabilities (0 for invalid RoIs).
        score_thr: pairs need a score above it (``multiclass_nms_boxes_per_class``'s rule).
        iou_threshold: suppression IoU within a class.
        max_per_img: detections kept (<= 0: all pairs).
        nms_pre: at most this many best pairs enter NMS (None or <= 0: all).

    Returns:
        ``num_dets [B]`` int64, ``boxes [B, M, 4]``, ``scores [B, M]``, ``labels [B, M]`` int64 (``LABEL_PAD`` in
        padding rows, whose boxes and scores are 0) and the RoI index of each row ``[B, M]`` int64,
        ``M = max_per_img`` (``K * C`` when <= 0).
    """
    b, k, c = probs.shape
    pairs = k * c
    if nms_pre is not None and 0 < nms_pre < pairs:
        kth = probs.reshape(b, pairs).topk(nms_pre, dim=1).values[:, -1]
        probs = torch.where(probs >= kth[:, None, None], probs, torch.zeros_like(probs))
    m = max_per_img if max_per_img > 0 else pairs
    # One NMS "batch" per (image, class): boxes [B*C, K, 4], scores [B*C, 1, K].
    per_class_boxes = boxes.expand(b, k, c, 4).permute(0, 2, 1, 3).reshape(b * c, k, 4)
    per_class_scores = probs.permute(0, 2, 1).reshape(b * c, 1, k)
    selected = torch.ops.oars.nms(per_class_boxes, per_class_scores, min(k, m), iou_threshold, score_thr)
    kept = torch.zeros_like(per_class_scores).index_put(
        (selected[:, 0], selected[:, 1], selected[:, 2]), torch.ones_like(selected[:, 0], dtype=probs.dtype)
    )
    top = min(m, pairs)
    scores, idx = (per_class_scores * kept).reshape(b, pairs).topk(top, dim=1)  # idx = class * K + roi
    labels = idx // k
    roi = idx % k
    det_boxes = per_class_boxes.reshape(b, pairs, 4).gather(1, idx[..., None].expand(-1, -1, 4))
    num_dets = kept.reshape(b, pairs).sum(dim=1).to(torch.int64).clamp(max=top)
    valid = torch.arange(top, device=probs.device)[None, :] < num_dets[:, None]
    scores = torch.where(valid, scores, torch.zeros_like(scores))
    labels = torch.where(valid, labels, torch.full_like(labels, LABEL_PAD))
    det_boxes = torch.where(valid[..., None], det_boxes, torch.zeros_like(det_boxes))
    roi = torch.where(valid, roi, torch.zeros_like(roi))
    if top < m:  # fewer (RoI, class) pairs than rows: pad to the promised M
        pad = m - top
        scores = F.pad(scores, (0, pad))
        labels = F.pad(labels, (0, pad), value=LABEL_PAD)
        det_boxes = F.pad(det_boxes, (0, 0, 0, pad))
        roi = F.pad(roi, (0, pad))
    return num_dets, det_boxes, scores, labels, roi


class TwoStageExport(nn.Module):
    """image ``[B, 3, H, W]`` -> ``(num_dets, boxes, scores, labels[, masks])`` (see the module docstring).

    Args:
        detector: a ``TwoStageDetector`` (``FasterRCNN``, ``MaskRCNN``, ``CascadeRCNN``) in eval mode, with
            RoIAlign extractors.
        input_hw: the exported input's (H, W).
        with_masks: output mask probabilities (default: when the RoI head has a mask head).
    """

    def __init__(self, detector: nn.Module, input_hw: tuple[int, int], with_masks: bool | None = None) -> None:
        super().__init__()
        self.detector = detector
        self.rpn_head = detector.rpn_head
        self.roi_head = detector.roi_head
        self.input_hw = (int(input_hw[0]), int(input_hw[1]))
        roi = self.roi_head
        self.cascade = hasattr(roi, "num_stages")
        self.num_classes = int(roi.num_classes)
        self.bbox_heads = _as_list(roi.bbox_head)
        self.bbox_extractors = nn.ModuleList(LevelRoIAlign(e) for e in _as_list(roi.bbox_roi_extractor))
        self.shared_head = getattr(roi, "shared_head", None)
        has_masks = getattr(roi, "mask_head", None) is not None
        self.with_masks = has_masks if with_masks is None else bool(with_masks) and has_masks
        if self.with_masks:
            self.mask_heads = _as_list(roi.mask_head)
            if roi.share_roi_extractor:
                self.mask_extractors = self.bbox_extractors
            else:
                self.mask_extractors = nn.ModuleList(LevelRoIAlign(e) for e in _as_list(roi.mask_roi_extractor))
            self.mask_size = int(self.mask_heads[-1].mask_size)
        cfg = roi.test_cfg
        self.score_thr = float(cfg["score_thr"])
        self.iou_threshold = float(cfg["nms"]["iou_threshold"])
        self.nms_pre = int(cfg["nms_pre"] or 0)
        self.mask_thr_binary = float(cfg["mask_thr_binary"])
        # test_cfg.rcnn.min_bbox_size (> 0): decoded boxes narrower or lower than it take no part in NMS
        self.min_bbox_size = float(cfg.get("min_bbox_size", 0.0) or 0.0)
        self.num_proposals = self._count_proposals()
        max_per_img = int(cfg["max_per_img"])
        self.max_per_img = max_per_img if max_per_img > 0 else self.num_proposals * self.num_classes

    def _count_proposals(self) -> int:
        """``K``: the proposals per image the RPN part yields at this input size (one probe forward)."""
        param = next(self.detector.parameters(), None)
        device = param.device if param is not None else torch.device("cpu")
        with torch.no_grad():
            feats = self.detector.extract_feat(torch.zeros(1, 3, *self.input_hw, device=device))
            boxes, _ = static_proposals(self.rpn_head, feats, self.input_hw)
        return int(boxes.shape[1])

    # ----------------------------------------------------------------- pieces
    def _box_stage(self, stage: int, feats: Sequence[Tensor], rois: Tensor, batch_idx: Tensor
                   ) -> tuple[Tensor, Tensor]:
        x = self.bbox_extractors[stage](feats, rois, batch_idx)
        if self.shared_head is not None:
            x = self.shared_head(x)
        return self.bbox_heads[stage](x)

    def _boxes_and_probs(self, feats: Sequence[Tensor], rois: Tensor, batch_idx: Tensor) -> tuple[Tensor, Tensor]:
        """RoIs ``[R, 4]`` -> class boxes ``[R, C or 1, 4]`` (clipped to the input) and probabilities ``[R, C]``."""
        if not self.cascade:
            cls_score, bbox_pred = self._box_stage(0, feats, rois, batch_idx)
            probs = F.softmax(cls_score.float(), dim=-1)
        else:
            stage_scores = []
            for stage in range(len(self.bbox_heads)):
                cls_score, bbox_pred = self._box_stage(stage, feats, rois, batch_idx)
                stage_scores.append(cls_score.float())
                if stage < len(self.bbox_heads) - 1:  # CascadeRoIHead._refine_rois, clipped to the input
                    labels = cls_score[:, :-1].argmax(dim=1)
                    rois = self.bbox_heads[stage].regress_by_class(rois, labels, bbox_pred, None)
                    if getattr(self.bbox_heads[stage].bbox_coder, "clip_border", True):
                        rois = clip_boxes(rois, self.input_hw)
            if self.roi_head.score_combination == "logits":
                probs = F.softmax(torch.stack(stage_scores).mean(dim=0), dim=-1)
            else:
                probs = torch.stack([F.softmax(s, dim=-1) for s in stage_scores]).mean(dim=0)
        head = self.bbox_heads[-1]
        deltas = bbox_pred.float().reshape(bbox_pred.shape[0], -1, 4)
        boxes = _decode(head, rois[:, None, :], deltas, self.input_hw)
        return boxes, probs[:, : self.num_classes]

    def _mask_probs(self, feats: Sequence[Tensor], boxes: Tensor, labels: Tensor) -> Tensor:
        """Detections ``boxes [B, M, 4]``, ``labels [B, M]`` -> the label's mask probabilities ``[B, M, h, w]``."""
        b, m = labels.shape
        flat = boxes.reshape(b * m, 4)
        batch_idx = torch.arange(b, device=boxes.device)[:, None].expand(b, m).reshape(-1)
        stages = range(len(self.mask_heads))
        if self.cascade and self.roi_head.mask_combination == "last":
            stages = [len(self.mask_heads) - 1]
        probs = []
        for stage in stages:  # CascadeRoIHead._stage_mask_probs: the mean of the stages' probabilities
            x = self.mask_extractors[stage](feats, flat, batch_idx)
            if self.shared_head is not None:
                x = self.shared_head(x)
            probs.append(self.mask_heads[stage](x).float().sigmoid())
        mean = probs[0] if len(probs) == 1 else torch.stack(probs).mean(dim=0)  # [B*M, C or 1, h, w]
        if self.mask_heads[-1].class_agnostic:
            picked = mean[:, 0]
        else:
            channel = labels.reshape(-1).clamp(min=0)[:, None, None, None].expand(-1, 1, *mean.shape[-2:])
            picked = mean.gather(1, channel)[:, 0]
        picked = picked.reshape(b, m, *mean.shape[-2:])
        return torch.where((labels >= 0)[..., None, None], picked, torch.zeros_like(picked))

    # ----------------------------------------------------------------- forward
    def forward(self, image: Tensor) -> tuple[Tensor, ...]:
        feats = self.detector.extract_feat(image)
        proposals, valid = static_proposals(self.rpn_head, feats, self.input_hw)  # [B, K, 4], [B, K]
        b, k = valid.shape
        rois = proposals.reshape(b * k, 4)
        batch_idx = torch.arange(b, device=image.device)[:, None].expand(b, k).reshape(-1)
        boxes, probs = self._boxes_and_probs(feats, rois, batch_idx)
        probs = probs.reshape(b, k, -1) * valid[..., None].to(probs.dtype)
        boxes = boxes.reshape(b, k, -1, 4)
        if self.min_bbox_size > 0:  # BBoxHead.predict_by_feat's removal of small boxes, per (RoI, class)
            big = ((boxes[..., 2] - boxes[..., 0]) >= self.min_bbox_size) & (
                (boxes[..., 3] - boxes[..., 1]) >= self.min_bbox_size)
            probs = probs * big.to(probs.dtype)
        num_dets, det_boxes, scores, labels, _ = multiclass_nms_static(
            boxes, probs, self.score_thr, self.iou_threshold, self.max_per_img, self.nms_pre
        )
        if not self.with_masks:
            return num_dets, det_boxes, scores, labels
        return num_dets, det_boxes, scores, labels, self._mask_probs(feats, det_boxes, labels)
