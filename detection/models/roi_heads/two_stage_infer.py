"""Two-stage inference (Faster / Mask / Cascade R-CNN after the RPN), written once with static shapes.

Why once: the eager ``model.predict`` and the exported ONNX graph (:mod:`detection.export.two_stage`) run these
same functions, so they cannot drift apart. Every shape depends on the input size only (the batch may vary);
the only steps whose eager and exported forms differ are the two custom ops of :mod:`detection.models.ops`
(``oars::nms``: torchvision's ``batched_nms`` eagerly, ONNX ``NonMaxSuppression`` exported; ``oars::roi_align``)
and, with ``static=False`` (eager), two savings that change no number:

- RoI pooling: eagerly the extractor itself (one ``roi_align`` per level on that level's RoIs; it also serves
  ``RoIPool``); exported, every level pools every RoI with the other levels' RoIs replaced by an empty box and
  each RoI takes its own level's result (``where``), equal to the extractor to the bit (tested).
- Masks: eagerly the mask head runs on the detections only, exported on all ``M`` rows (padding rows zeroed).

Steps (after :meth:`RPNHead.proposals_padded`: ``K`` proposals per image and their ``valid`` flags):

1. Box head (Cascade: every stage, the RoIs refined with each stage's regression of its best foreground class,
   clipped to the image; scores combined as the head's ``score_combination``), softmax, class-specific (or
   agnostic) boxes decoded and clipped to each image's ``img_shape``; invalid proposals and (with
   ``test_cfg.min_bbox_size``) boxes narrower or lower than it get score 0.
2. Per-class NMS as ONE ``oars::nms`` over ``B * C`` "batches" (one per image and class: each class's own
   boxes, no coordinate offsets), ``test_cfg`` ``score_thr``, ``nms_pre`` and ``max_per_img``; the kept pairs'
   ``max_per_img`` best fill the padded outputs, rows by decreasing score. ``test_cfg.nms.type: soft_nms``:
   per-class soft-NMS (the runtime's NumPy implementation) per image instead, eagerly only (the static form
   refuses it: ONNX has no soft NMS).
3. Masks (mask heads): the mask head (Cascade: the mean of the stages' probabilities, or the last stage's) on the
   detections' boxes, the label's channel, sigmoid: ``[B, M, 28, 28]`` probabilities; pasting into the image
   (``oars_deploy.mask_paste``) is the caller's (:func:`results_from_padded`, the deploy predictors).

NMS runs on boxes in input (pipeline) pixels, as torchvision; detections are rescaled to original pixels after
it (MMDetection rescales before its NMS; the two differ only for borderline pairs when the x and y scales differ).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from mmengine.structures import InstanceData
from torch import Tensor, nn

from ..heads.dense_utils import refuse_soft_nms_in_graph, soft_nms_image
from ..ops import LABEL_PAD
from .utils import scale_factor_of

Padded = tuple[Tensor, ...]  # (num_dets [B], boxes [B, M, 4], scores [B, M], labels [B, M][, masks [B, M, h, w]])


def image_hw(metas: Sequence[dict[str, Any]], device: torch.device) -> Tensor:
    """float32 ``[B, 2]``: each image's un-padded ``(H, W)`` (``img_shape``, else ``batch_input_shape``)."""
    shapes = []
    for meta in metas:
        shape = meta.get("img_shape") or meta.get("batch_input_shape")
        if shape is None:
            raise ValueError("two-stage inference: a data sample has neither 'img_shape' nor 'batch_input_shape'")
        shapes.append((float(shape[0]), float(shape[1])))
    return torch.tensor(shapes, dtype=torch.float32, device=device)


def clip_boxes(boxes: Tensor, img_hw: Tensor) -> Tensor:
    """xyxy ``boxes [B, ..., 4]`` clipped to ``[0, W_b] x [0, H_b]`` of their image (``img_hw [B or 1, 2]``):
    the box coders' ``max_shape`` clipping per image, with tensor bounds (they trace as graph inputs; torch
    2.14's ONNX type promotion fails on ``clamp(0, 128.0)``, an int and a float bound)."""
    hw = img_hw.to(device=boxes.device, dtype=boxes.dtype)
    bounds = torch.stack([hw[:, 1], hw[:, 0], hw[:, 1], hw[:, 0]], dim=-1)
    bounds = bounds.reshape(bounds.shape[0], *([1] * (boxes.dim() - 2)), 4)
    return torch.minimum(boxes.clamp(min=0.0), bounds)


def check_static_extractor(extractor: nn.Module) -> None:
    """Raise ValueError unless ``extractor`` (a ``SingleRoIExtractor``) pools with RoIAlign (the static form)."""
    kind = extractor.roi_layer["type"]
    if kind != "RoIAlign":
        raise ValueError(f"two-stage export: roi_layer.type={kind!r} has no static ONNX form here; export supports "
                         "RoIAlign extractors")


def pool_rois(extractor: nn.Module, feats: Sequence[Tensor], boxes: Tensor, batch_idx: Tensor, static: bool
              ) -> Tensor:
    """RoI features of ``boxes [R, 4]`` (input pixels) of images ``batch_idx [R]`` int64: float32
    ``[R, C, h, w]``, each RoI pooled from the level ``extractor.map_roi_levels`` gives it (see the module
    docstring for the eager and the static form)."""
    boxes = boxes.float()
    if not static:
        return extractor(feats, torch.cat([batch_idx.to(boxes.dtype)[:, None], boxes], dim=1))
    check_static_extractor(extractor)
    layer = extractor.roi_layer
    out_h, out_w = (int(s) for s in layer["output_size"])
    scales = [1.0 / float(s) for s in extractor.featmap_strides]

    def align(feat: Tensor, rois: Tensor, scale: float) -> Tensor:
        return torch.ops.oars.roi_align(feat.float(), rois, batch_idx, out_h, out_w, scale,
                                        int(layer["sampling_ratio"]), bool(layer["aligned"]))

    if len(scales) == 1:
        return align(feats[0], boxes, scales[0])
    levels = extractor.map_roi_levels(boxes)
    out = None
    for level, scale in enumerate(scales):
        mine = levels == level
        # Other levels' RoIs become empty boxes: one sample per bin instead of an adaptive grid.
        pooled = align(feats[level], torch.where(mine[:, None], boxes, torch.zeros_like(boxes)), scale)
        out = torch.where(mine[:, None, None, None], pooled, torch.zeros_like(pooled) if out is None else out)
    return out


def multiclass_nms_padded(boxes: Tensor, probs: Tensor, score_thr: float, iou_threshold: float, max_per_img: int,
                          nms_pre: int | None) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Per-class NMS of class-specific boxes with static shapes (step 2 of the module docstring).

    Args:
        boxes: ``[B, K, C, 4]`` (or ``[B, K, 1, 4]``, class-agnostic) float32 boxes per RoI and class.
        probs: ``[B, K, C]`` float32 foreground probabilities (0 for pairs that take no part).
        score_thr: pairs need a score above it (MMDetection's rule).
        iou_threshold: suppression IoU within a class.
        max_per_img: detections kept (<= 0: all pairs).
        nms_pre: at most this many best pairs enter NMS (None or <= 0: all), which bounds the NMS's cost when a
            low ``score_thr`` lets through up to ``K * C`` pairs.

    Returns:
        ``num_dets [B]`` int64, ``boxes [B, M, 4]``, ``scores [B, M]``, ``labels [B, M]`` int64 (``LABEL_PAD`` in
        padding rows, whose boxes and scores are 0) and the RoI index of each row ``[B, M]`` int64,
        ``M = max_per_img`` (``K * C`` when <= 0); valid rows by decreasing score.
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


def soft_nms_padded(boxes: Tensor, probs: Tensor, cfg: dict[str, Any]) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Eager per-class soft-NMS (``test_cfg.nms.type: soft_nms``) with the padded outputs of
    :func:`multiclass_nms_padded`: per image :func:`detection.models.heads.dense_utils.soft_nms_image` on the
    pairs above ``score_thr`` (the ``nms_pre`` best), the ``max_per_img`` best rows, decayed scores.

    Args:
        boxes: ``[B, K, C or 1, 4]`` class boxes; probs: ``[B, K, C]`` (0 for pairs that take no part).
        cfg: the RoI head's checked ``test_cfg``.

    Returns:
        ``num_dets [B]``, ``boxes [B, M, 4]``, ``scores [B, M]``, ``labels [B, M]`` (``LABEL_PAD`` in padding rows),
        ``M = max_per_img`` (``K * C`` when <= 0).
    """
    b, k, c = probs.shape
    m = int(cfg["max_per_img"]) if int(cfg["max_per_img"]) > 0 else k * c
    out_boxes = probs.new_zeros((b, m, 4))
    out_scores = probs.new_zeros((b, m))
    out_labels = torch.full((b, m), LABEL_PAD, dtype=torch.int64, device=probs.device)
    num_dets = torch.zeros((b,), dtype=torch.int64, device=probs.device)
    for i in range(b):
        per_class = boxes[i] if boxes.shape[2] == c else boxes[i, :, 0]
        det_boxes, det_scores, det_labels = soft_nms_image(per_class, probs[i], cfg["nms"], float(cfg["score_thr"]),
                                                           m, int(cfg["nms_pre"] or 0))
        n = det_scores.shape[0]
        num_dets[i] = n
        out_boxes[i, :n], out_scores[i, :n], out_labels[i, :n] = det_boxes, det_scores, det_labels
    return num_dets, out_boxes, out_scores, out_labels


def _decode(bbox_head: nn.Module, priors: Tensor, deltas: Tensor, img_hw: Tensor) -> Tensor:
    """``bbox_head.bbox_coder.decode`` of ``priors [B, K, (1,) 4]``, clipped per image when the coder clips."""
    boxes = bbox_head.bbox_coder.decode(priors, deltas, max_shape=None)
    return clip_boxes(boxes, img_hw) if getattr(bbox_head.bbox_coder, "clip_border", True) else boxes


def boxes_and_probs(roi_head: nn.Module, feats: Sequence[Tensor], rois: Tensor, img_hw: Tensor, static: bool
                    ) -> tuple[Tensor, Tensor]:
    """RoIs ``[B, K, 4]`` -> class boxes ``[B, K, C or 1, 4]`` (clipped) and foreground probabilities
    ``[B, K, C]`` (step 1; ``roi_head.box_stages()`` gives the (extractor, shared head, box head) of each stage,
    ``roi_head.combine_scores`` turns the stages' logits into probabilities). A head with ``combine_boxes``
    (:class:`CascadeClsAwareRoIHead`) gets every stage's class boxes, each decoded from the boxes that stage
    was given, and returns the merged boxes; otherwise the boxes are the last stage's."""
    b, k = rois.shape[:2]
    flat = rois.reshape(b * k, 4).float()
    batch_idx = torch.arange(b, device=rois.device)[:, None].expand(b, k).reshape(-1)
    stages = roi_head.box_stages()
    merge_boxes = callable(getattr(roi_head, "combine_boxes", None))  # class-aware cascade: every stage's boxes
    stage_scores, stage_boxes = [], []
    for i, (extractor, shared_head, bbox_head) in enumerate(stages):
        x = pool_rois(extractor, feats, flat, batch_idx, static)
        if shared_head is not None:
            x = shared_head(x)
        cls_score, bbox_pred = bbox_head(x)
        stage_scores.append(cls_score.float())
        if merge_boxes:
            stage_boxes.append(_decode(bbox_head, flat.reshape(b, k, 1, 4), bbox_pred.float().reshape(b, k, -1, 4),
                                       img_hw))
        if i < len(stages) - 1:  # Cascade: refine by this stage's best foreground class, clipped to the image
            labels = cls_score[:, :-1].argmax(dim=1)
            refined = _decode(bbox_head, flat.reshape(b, k, 4), _class_deltas(bbox_head, bbox_pred, labels, b, k),
                              img_hw)
            flat = refined.reshape(b * k, 4)
    probs = roi_head.combine_scores(stage_scores)
    if merge_boxes:
        boxes = roi_head.combine_boxes(stage_boxes)
    else:
        boxes = _decode(stages[-1][2], flat.reshape(b, k, 1, 4), bbox_pred.float().reshape(b, k, -1, 4), img_hw)
    return boxes, probs[:, : roi_head.num_classes].reshape(b, k, -1)


def _class_deltas(bbox_head: nn.Module, bbox_pred: Tensor, labels: Tensor, b: int, k: int) -> Tensor:
    """Each RoI's deltas of class ``labels`` (any for class-agnostic regression): ``[B, K, 4]`` float32."""
    deltas = bbox_pred.float()
    if not bbox_head.reg_class_agnostic:
        deltas = deltas.reshape(deltas.shape[0], -1, 4).gather(1, labels.long().reshape(-1, 1, 1).expand(-1, 1, 4))
    return deltas.reshape(b, k, 4)


def mask_probs(roi_head: nn.Module, feats: Sequence[Tensor], boxes: Tensor, labels: Tensor, static: bool) -> Tensor:
    """Detections ``boxes [B, M, 4]``, ``labels [B, M]`` (``LABEL_PAD`` in padding rows) -> the label's mask
    probabilities ``[B, M, h, w]`` float32, 0 in padding rows (step 3; ``roi_head.mask_stages()`` gives the
    (extractor, shared head, mask head) of the stages whose probabilities are averaged)."""
    b, m = labels.shape
    stages = roi_head.mask_stages()
    size = int(stages[-1][2].mask_size)
    flat_boxes, flat_labels = boxes.reshape(b * m, 4), labels.reshape(-1)
    batch_idx = torch.arange(b, device=boxes.device)[:, None].expand(b, m).reshape(-1)
    rows = None
    if not static:  # eagerly only the detections (a mask head costs ~0.5 GFLOP per RoI at full width)
        rows = torch.nonzero(flat_labels >= 0).flatten()
        flat_boxes, flat_labels, batch_idx = flat_boxes[rows], flat_labels[rows], batch_idx[rows]
    probs = []
    for extractor, shared_head, mask_head in stages:
        x = pool_rois(extractor, feats, flat_boxes, batch_idx, static)
        if shared_head is not None:
            x = shared_head(x)
        probs.append(mask_head(x).float().sigmoid())
    mean = probs[0] if len(probs) == 1 else torch.stack(probs).mean(dim=0)  # [N, C or 1, h, w]
    if stages[-1][2].class_agnostic:
        picked = mean[:, 0]
    else:
        channel = flat_labels.clamp(min=0)[:, None, None, None].expand(-1, 1, *mean.shape[-2:])
        picked = mean.gather(1, channel)[:, 0]
    if rows is not None:
        return picked.new_zeros((b * m, size, size)).index_copy(0, rows, picked).reshape(b, m, size, size)
    picked = picked.reshape(b, m, *mean.shape[-2:])
    return torch.where((labels >= 0)[..., None, None], picked, torch.zeros_like(picked))


def detect_padded(roi_head: nn.Module, feats: Sequence[Tensor], proposals: Tensor, valid: Tensor, img_hw: Tensor,
                  static: bool) -> Padded:
    """Steps 1-3 of the module docstring.

    Args:
        roi_head: a ``StandardRoIHead`` or ``CascadeRoIHead`` (its ``test_cfg``: score_thr, nms.iou_threshold,
            max_per_img, nms_pre, min_bbox_size).
        feats: the neck's maps ``[B, C, H_l, W_l]``.
        proposals: ``[B, K, 4]`` float32 in input pixels; valid: ``[B, K]`` bool (False: padding, takes no part).
        img_hw: float32 ``[B or 1, 2]``: each image's ``(H, W)`` the boxes are clipped to.
        static: the exported form (see the module docstring); False for eager inference.

    Returns:
        ``num_dets [B]`` int64, ``boxes [B, M, 4]`` float32 (input pixels), ``scores [B, M]``, ``labels [B, M]``
        int64 (``LABEL_PAD`` in padding rows) and, with a mask head, ``masks [B, M, h, w]`` probabilities;
        ``M = test_cfg.max_per_img`` (``K * C`` when <= 0).
    """
    cfg = roi_head.test_cfg
    b, k = valid.shape
    boxes, probs = boxes_and_probs(roi_head, feats, proposals, img_hw, static)
    probs = probs * valid[..., None].to(probs.dtype)
    min_size = float(cfg.get("min_bbox_size", 0.0) or 0.0)
    if min_size > 0:  # torchvision's removal of small boxes, per (RoI, class)
        big = ((boxes[..., 2] - boxes[..., 0]) >= min_size) & ((boxes[..., 3] - boxes[..., 1]) >= min_size)
        probs = probs * big.to(probs.dtype)
    if cfg["nms"].get("type") == "soft_nms":
        if static:
            refuse_soft_nms_in_graph(cfg["nms"], "model.test_cfg.rcnn.nms")
        num_dets, det_boxes, scores, labels = soft_nms_padded(boxes, probs, cfg)
    else:
        num_dets, det_boxes, scores, labels, _ = multiclass_nms_padded(
            boxes, probs, float(cfg["score_thr"]), float(cfg["nms"]["iou_threshold"]), int(cfg["max_per_img"]),
            int(cfg["nms_pre"] or 0),
        )
    if not roi_head.with_mask:
        return num_dets, det_boxes, scores, labels
    return num_dets, det_boxes, scores, labels, mask_probs(roi_head, feats, det_boxes, labels, static)


def pad_proposals(proposals: Sequence[InstanceData]) -> tuple[Tensor, Tensor]:
    """Per-image proposals (``bboxes [P_i, 4]``) -> ``boxes [B, K, 4]`` float32 and ``valid [B, K]`` bool,
    ``K = max(1, max P_i)``, each image's proposals first in their order, zero boxes after."""
    k = max([1, *(len(p) for p in proposals)])
    device = proposals[0].bboxes.device
    boxes = torch.zeros((len(proposals), k, 4), device=device)
    valid = torch.zeros((len(proposals), k), dtype=torch.bool, device=device)
    for i, p in enumerate(proposals):
        boxes[i, : len(p)] = p.bboxes[:, :4].float()
        valid[i, : len(p)] = True
    return boxes, valid


def results_from_padded(roi_head: nn.Module, outs: Padded, metas: Sequence[dict[str, Any]], rescale: bool
                        ) -> list[InstanceData]:
    """Padded outputs of :func:`detect_padded` -> per image ``InstanceData(bboxes [N, 4], scores [N], labels [N]
    int64[, masks bool [N, H, W]])``: the ``num_dets`` valid rows, boxes divided by ``scale_factor`` when
    ``rescale`` (original pixels), masks pasted by the mask head (``oars_deploy.mask_paste``) into ``ori_shape``
    (``img_shape`` without ``rescale``) at ``test_cfg.mask_thr_binary``."""
    num_dets, boxes, scores, labels = outs[:4]
    results, probs = [], []
    for i, meta in enumerate(metas):
        n = int(num_dets[i])
        res = InstanceData(bboxes=boxes[i, :n], scores=scores[i, :n], labels=labels[i, :n])
        if rescale and not roi_head.with_mask:
            sw, sh = scale_factor_of(meta)
            res.bboxes = res.bboxes / res.bboxes.new_tensor([sw, sh, sw, sh])
        results.append(res)
        if roi_head.with_mask:
            probs.append(outs[4][i, :n])
    if not roi_head.with_mask:
        return results
    mask_head = roi_head.mask_stages()[-1][2]
    return mask_head.predict_by_feat(probs, results, metas, roi_head.test_cfg["mask_thr_binary"], rescale,
                                     probs_are_selected=True)
