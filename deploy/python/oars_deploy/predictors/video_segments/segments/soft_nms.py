"""Gaussian Soft-NMS of temporal proposals (Bodla et al. 2017) with BMN's width-adaptive IoU threshold (NumPy):
the runtime's one soft-NMS (:func:`oars_deploy.soft_nms.soft_nms`) on intervals, with a threshold per kept width."""

from __future__ import annotations

import numpy as np

from oars_deploy.soft_nms import soft_nms as interval_soft_nms


def soft_nms(proposals: np.ndarray, alpha: float = 0.4, low_threshold: float = 0.5, high_threshold: float = 0.9,
             top_k: int = 100) -> np.ndarray:
    """Gaussian Soft-NMS, the rule of MMAction2's ``soft_nms`` (BSN/BMN post-processing), one step per kept
    proposal with every step vectorised over the remaining ones.

    Each step keeps the remaining proposal with the highest (current) score, ``m``, then decays every other
    remaining proposal ``i`` whose IoU with ``m`` exceeds a threshold that grows with ``m``'s normalised width::

        if iou(i, m) > low_threshold + (high_threshold - low_threshold) * (end_m - start_m):
            score_i *= exp(-iou(i, m) ** 2 / alpha)

    (long proposals overlap their neighbours more at the same boundary error, so they suppress less). Scores
    are never zeroed, only decayed; a kept proposal keeps the score it had when it was picked. Like the
    reference, the loop stops after ``top_k + 1`` picks (its ``len(kept) <= top_k`` test) or when none remain.

    Args:
        proposals: float [K, >= 3]: ``start, end`` in normalised time ([0, 1], the threshold reads the width in
            that unit) in columns 0 and 1, the score in the last column.
        alpha: the Gaussian's width (BMN: 0.4).
        low_threshold, high_threshold: the IoU threshold for a zero-width and a full-width kept proposal.
        top_k: how many to keep (one more is kept, as the reference does; callers cut to their own count).

    Returns:
        np.ndarray: [min(K, top_k + 1), 3] of the input's float dtype, ``start, end, decayed score`` in pick order
        (non-increasing score).

    Raises:
        ValueError: ``proposals`` is not [K, >= 3].
    """
    proposals = np.asarray(proposals)
    if proposals.ndim != 2 or proposals.shape[1] < 3:
        raise ValueError("soft_nms: proposals must be [K, >= 3] (start, end, ..., score), got "
                         f"{tuple(proposals.shape)}")
    dtype = np.result_type(proposals.dtype, np.float32)
    start, end = proposals[:, 0].astype(dtype), proposals[:, 1].astype(dtype)
    # the threshold that applies when proposal j is the kept one: it grows with j's width
    thresholds = low_threshold + (high_threshold - low_threshold) * (end - start)
    keep, kept_scores = interval_soft_nms(proposals[:, :2], proposals[:, -1], method="gaussian", sigma=alpha,
                                          iou_threshold=thresholds, max_keep=top_k + 1)
    return np.stack([start[keep], end[keep], kept_scores.astype(dtype, copy=False)], axis=1)
