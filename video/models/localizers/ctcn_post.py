"""C-TCN's detections from anchor scores (PaddleVideo ``BoxCoder.decode``): per class, a score threshold, hard
NMS, then Gaussian Soft-NMS with a final score threshold. Thin torch adapters over the NumPy implementation in
:mod:`oars_deploy.predictors.video_segments.segments.ctcn_decode`, which the deployed ``video_segments`` predictor
runs too (one
implementation: evaluation and deployment cannot disagree)."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from oars_deploy.predictors.video_segments.segments.ctcn_decode import ctcn_detections as _detections
from oars_deploy.predictors.video_segments.segments.ctcn_decode import nms_rows, soft_nms_rows


def _np(x: Tensor) -> np.ndarray:
    return x.detach().cpu().double().numpy()


def segment_nms(segments: Tensor, scores: Tensor, classes: Tensor, iou_threshold: float) -> Tensor:
    """Hard NMS of 1-D segments, independently per class (torchvision's ``batched_nms`` rule on the segments'
    temporal IoU).

    Args:
        segments: float [K, 2] (start, end).
        scores: float [K].
        classes: int64 [K].
        iou_threshold: a segment overlapping a kept one of its class by more than this is dropped.

    Returns:
        Tensor: int64 indices of the kept segments, by decreasing score (ties: the lower index first).
    """
    score, cls = _np(scores), classes.detach().cpu().numpy()
    order = np.lexsort((-score, cls))  # class-major, then decreasing score (stable on ties)
    groups, first, counts = np.unique(cls[order], return_index=True, return_counts=True)
    if groups.size == 0:
        return torch.zeros(0, dtype=torch.long, device=segments.device)
    row = np.repeat(np.arange(groups.size), counts)
    rank = np.arange(order.size) - first[row]
    grid = np.zeros((groups.size, int(counts.max()), 2))
    valid = np.zeros(grid.shape[:2], dtype=bool)
    grid[row, rank], valid[row, rank] = _np(segments)[order], True
    kept = order[nms_rows(grid, valid, iou_threshold)[row, rank]]
    kept = kept[np.argsort(-score[kept], kind="stable")]
    return torch.as_tensor(kept, dtype=torch.long, device=segments.device)


def gaussian_soft_nms_rows(segments: Tensor, scores: Tensor, sigma: float, min_score: float) -> Tensor:
    """Gaussian Soft-NMS of many independent sets at once
    (:func:`oars_deploy.predictors.video_segments.segments.ctcn_decode.soft_nms_rows`).

    Args:
        segments: float [R, K, 2] (start, end), rows padded.
        scores: float [R, K], 0 (or anything below ``min_score``) on padding.
        sigma: the Gaussian's width (PaddleVideo: 0.9).
        min_score: the final threshold (PaddleVideo: 0.004).

    Returns:
        Tensor: [R, K] of ``scores``' dtype, each segment's score when it was kept, 0 where it was not.
    """
    kept, _ = soft_nms_rows(_np(segments), _np(scores), sigma, min_score)
    return torch.as_tensor(kept, device=scores.device).to(scores.dtype)


def ctcn_detections(segments: Tensor, probs: Tensor, score_thresh: float = 0.001, nms_thresh: float = 0.8,
                    soft_sigma: float = 0.9, soft_thresh: float = 0.004, pre_nms_top_k: int = 200,
                    max_per_video: int = 1000) -> Tensor:
    """One video's detections: :func:`oars_deploy.predictors.video_segments.segments.ctcn_decode.ctcn_detections` on
    torch tensors.

    Args:
        segments: float [A, 2] decoded (start, end), normalised time.
        probs: float [A, K + 1] softmax scores, background first.
        score_thresh, nms_thresh, soft_sigma, soft_thresh, pre_nms_top_k, max_per_video: as the NumPy function
            (PaddleVideo's thresholds and the two caps; ``model.test_cfg`` in the configs).

    Returns:
        Tensor: [D, 4] of ``segments``' dtype (start, end, score, class id in ``[0, K)``), by decreasing score.
    """
    out = _detections(_np(segments), _np(probs), score_thresh, nms_thresh, soft_sigma, soft_thresh, pre_nms_top_k,
                      max_per_video)
    return torch.as_tensor(out, device=segments.device).to(segments.dtype)
