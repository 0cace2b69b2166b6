"""Multi-class NMS without torch, the same selection as detection/models/task_utils/postprocess.py (torchvision).

Why not torchvision: the raw-head export leaves thresholds and NMS to the predictor, which must not import
torch. Steps as ``multiclass_nms``: keep (box, class) pairs with score > ``score_thr``, the ``nms_pre`` best of
them, then greedy NMS per class with OpenCV's ``cv2.dnn.NMSBoxesBatched`` (IoU > ``iou_threshold`` suppresses,
as torchvision's ``batched_nms``), results sorted by decreasing score, the first ``max_per_img`` kept.

Boxes without area (width or height <= 0, e.g. a box clipped away at the image's edge or its letterbox padding)
bypass OpenCV: torchvision's IoU with them is 0 (or NaN for two of them), so they never suppress and are never
suppressed, while OpenCV calls two empty boxes anywhere identical and keeps one of them.
"""

from __future__ import annotations

import cv2
import numpy as np


def select_candidates(boxes: np.ndarray, scores: np.ndarray, score_thr: float, nms_pre: int | None
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (box, class) pairs that enter NMS (hard or soft, :mod:`oars_deploy.soft_nms`): score > ``score_thr``,
    then the ``nms_pre`` best (None or <= 0: all), ties in (box, class) order.

    Args:
        boxes: ``[N, 4]`` shared by the classes, or ``[N, C, 4]`` one box per class.
        scores: ``[N, C]``.

    Returns:
        ``(boxes [P, 4] float32, scores [P] float32, labels [P] int64)`` of the candidate pairs.

    Raises:
        ValueError: ``scores`` is not ``[N, C]`` or ``boxes`` not ``[N, 4]`` / ``[N, C, 4]``.
    """
    boxes = np.asarray(boxes, dtype=np.float32)
    scores = np.asarray(scores, dtype=np.float32)
    per_class = boxes.ndim == 3
    if not per_class:
        boxes = boxes.reshape(-1, 4)
    if scores.ndim != 2 or scores.shape[0] != len(boxes):
        raise ValueError(f"multiclass_nms: scores must be [N, C] with N = {len(boxes)} boxes, got {scores.shape}")
    if per_class and boxes.shape[1:] != (scores.shape[1], 4):
        raise ValueError(f"multiclass_nms: per-class boxes must be [N, C, 4] with C = {scores.shape[1]}, got "
                         f"{boxes.shape}")
    box_idx, labels = np.nonzero(scores > score_thr)
    cand_scores = scores[box_idx, labels]
    if nms_pre is not None and 0 < nms_pre < len(cand_scores):
        order = np.argsort(-cand_scores, kind="stable")[:nms_pre]
        box_idx, labels, cand_scores = box_idx[order], labels[order], cand_scores[order]
    cand_boxes = boxes[box_idx, labels] if per_class else boxes[box_idx]
    return cand_boxes.reshape(-1, 4), cand_scores, labels.astype(np.int64)


def multiclass_nms(boxes: np.ndarray, scores: np.ndarray, score_thr: float, iou_threshold: float,
                   max_per_img: int | None = 100, nms_pre: int | None = 1000
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One image: boxes [N, 4] (shared by the classes), scores [N, C] -> (boxes [K, 4] float32, scores [K] float32,
    labels [K] int64), sorted by decreasing score."""
    cand_boxes, cand_scores, labels = select_candidates(boxes, scores, score_thr, nms_pre)
    if len(cand_boxes) == 0:
        return np.zeros((0, 4), np.float32), np.zeros((0,), np.float32), np.zeros((0,), np.int64)
    xywh = np.concatenate([cand_boxes[:, :2], cand_boxes[:, 2:] - cand_boxes[:, :2]], axis=1)
    empty = (xywh[:, 2:] <= 0).any(axis=1)
    solid = np.flatnonzero(~empty)
    kept = cv2.dnn.NMSBoxesBatched(xywh[solid].tolist(), cand_scores[solid].tolist(), labels[solid].tolist(),
                                   -1.0,  # candidates are already above score_thr
                                   float(iou_threshold)) if len(solid) else []
    keep = np.concatenate([solid[np.asarray(kept, dtype=np.int64).reshape(-1)], np.flatnonzero(empty)])
    keep = keep[np.argsort(-cand_scores[keep], kind="stable")]
    if max_per_img is not None and max_per_img > 0:
        keep = keep[:max_per_img]
    return cand_boxes[keep], cand_scores[keep], labels[keep].astype(np.int64)
