"""Multi-class NMS in NumPy, the same selection as detection/models/task_utils/postprocess.py (torchvision).

Why a copy in NumPy: the raw-head export leaves thresholds and NMS to the predictor, which must not import
torch. Steps as ``multiclass_nms``: keep (box, class) pairs with score > ``score_thr``, the ``nms_pre`` best of
them, then greedy NMS per class (torchvision's ``batched_nms`` with its coordinate-offset trick: boxes of
different classes are moved apart so one pass never lets them suppress each other), IoU > ``iou_threshold``
suppresses, results sorted by decreasing score, the first ``max_per_img`` kept.
"""

from __future__ import annotations

import numpy as np


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float) -> np.ndarray:
    """Greedy NMS (torchvision.ops.nms): indices kept, by decreasing score. Boxes [N, 4] xyxy float32."""
    if len(boxes) == 0:
        return np.zeros((0,), dtype=np.int64)
    order = np.argsort(-scores, kind="stable")
    b = boxes[order]
    x1, y1, x2, y2 = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
    areas = (x2 - x1) * (y2 - y1)

    def over(i: int, js: slice | np.ndarray) -> np.ndarray:
        """IoU(box i, boxes js) > iou_threshold, in float32 as torchvision's CPU kernel."""
        w = np.maximum(np.minimum(x2[i], x2[js]) - np.maximum(x1[i], x1[js]), 0)
        h = np.maximum(np.minimum(y2[i], y2[js]) - np.maximum(y1[i], y1[js]), 0)
        inter = w * h
        with np.errstate(divide="ignore", invalid="ignore"):
            return inter / (areas[i] + areas[js] - inter) > iou_threshold

    suppressed = np.zeros(len(b), dtype=bool)
    keep = []
    for i in range(len(b)):
        if suppressed[i]:
            continue
        keep.append(i)
        suppressed[i + 1:] |= over(i, slice(i + 1, None))
    return order[np.asarray(keep, dtype=np.int64)]


def multiclass_nms(boxes: np.ndarray, scores: np.ndarray, score_thr: float, iou_threshold: float,
                   max_per_img: int | None = 100, nms_pre: int | None = 1000
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One image: boxes [N, 4] (shared by the classes), scores [N, C] -> (boxes [K, 4] float32, scores [K] float32,
    labels [K] int64), sorted by decreasing score."""
    boxes = np.asarray(boxes, dtype=np.float32).reshape(-1, 4)
    scores = np.asarray(scores, dtype=np.float32)
    if scores.ndim != 2 or scores.shape[0] != len(boxes):
        raise ValueError(f"multiclass_nms: scores must be [N, C] with N = {len(boxes)} boxes, got {scores.shape}")
    box_idx, labels = np.nonzero(scores > score_thr)
    cand_scores = scores[box_idx, labels]
    if nms_pre is not None and 0 < nms_pre < len(cand_scores):
        order = np.argsort(-cand_scores, kind="stable")[:nms_pre]
        box_idx, labels, cand_scores = box_idx[order], labels[order], cand_scores[order]
    cand_boxes = boxes[box_idx]
    if len(cand_boxes) == 0:
        return np.zeros((0, 4), np.float32), np.zeros((0,), np.float32), np.zeros((0,), np.int64)
    # torchvision's coordinate trick: offset each class by (max coordinate + 1) so classes never overlap.
    offsets = labels.astype(np.float32) * (cand_boxes.max() + np.float32(1))
    keep = nms(cand_boxes + offsets[:, None], cand_scores, iou_threshold)
    if max_per_img is not None and max_per_img > 0:
        keep = keep[:max_per_img]
    return cand_boxes[keep], cand_scores[keep], labels[keep].astype(np.int64)
