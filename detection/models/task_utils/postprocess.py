"""Detector-agnostic post-processing: per-class NMS over decoded boxes and per-class scores."""

from __future__ import annotations

from torch import Tensor
from torchvision.ops import batched_nms


def multiclass_nms(
    boxes: Tensor,
    scores: Tensor,
    score_thr: float,
    iou_threshold: float,
    max_per_img: int = 100,
    nms_pre: int | None = 1000,
) -> tuple[Tensor, Tensor, Tensor]:
    """NMS of one image's candidates, separately per class.

    Args:
        boxes: [N, 4] xyxy boxes, shared by every class (one box per prior, as YOLO/RetinaNet decode).
        scores: [N, C] per-class scores.
        score_thr: (box, class) pairs with a score <= this are dropped first.
        iou_threshold: IoU above which a lower-scored box of the same class is suppressed.
        max_per_img: detections kept after NMS (<= 0: all).
        nms_pre: the highest-scored pairs kept before NMS (None or <= 0: all), bounding NMS's cost.

    Returns:
        ``(bboxes [K, 4], scores [K], labels [K] int64)``, sorted by decreasing score.
    """
    if boxes.dim() != 2 or boxes.shape[-1] != 4:
        raise ValueError(f"multiclass_nms: boxes must be [N, 4], got {tuple(boxes.shape)}")
    if scores.dim() != 2 or scores.shape[0] != boxes.shape[0]:
        raise ValueError(
            f"multiclass_nms: scores must be [N, C] with N = {boxes.shape[0]} boxes, got {tuple(scores.shape)}"
        )
    box_idx, labels = (scores > score_thr).nonzero(as_tuple=True)
    cand_scores = scores[box_idx, labels]
    if nms_pre is not None and 0 < nms_pre < cand_scores.numel():
        cand_scores, order = cand_scores.topk(nms_pre)
        box_idx, labels = box_idx[order], labels[order]
    cand_boxes = boxes[box_idx]
    keep = batched_nms(cand_boxes.float(), cand_scores.float(), labels, iou_threshold)
    if max_per_img is not None and max_per_img > 0:
        keep = keep[:max_per_img]
    return cand_boxes[keep], cand_scores[keep], labels[keep].long()
