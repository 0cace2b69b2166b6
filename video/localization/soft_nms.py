"""Gaussian Soft-NMS of temporal proposals (Bodla et al. 2017) with BMN's width-adaptive IoU threshold."""

from __future__ import annotations

import torch
from torch import Tensor


def soft_nms(proposals: Tensor, alpha: float = 0.4, low_threshold: float = 0.5, high_threshold: float = 0.9,
             top_k: int = 100) -> Tensor:
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
        Tensor: [min(K, top_k + 1), 3] float, ``start, end, decayed score`` in pick order (non-increasing score).
    """
    if proposals.dim() != 2 or proposals.shape[1] < 3:
        raise ValueError("soft_nms: proposals must be [K, >= 3] (start, end, ..., score), got "
                         f"{tuple(proposals.shape)}")
    start, end = proposals[:, 0].clone(), proposals[:, 1].clone()
    score = proposals[:, -1].clone()
    alive = torch.ones_like(score, dtype=torch.bool)
    keep_idx, keep_score = [], []
    neg_inf = torch.tensor(float("-inf"), dtype=score.dtype, device=score.device)
    for _ in range(min(proposals.shape[0], top_k + 1)):
        m = int(torch.where(alive, score, neg_inf).argmax())
        keep_idx.append(m)
        keep_score.append(score[m].clone())
        alive[m] = False
        inter = (end.minimum(end[m]) - start.maximum(start[m])).clamp(min=0)
        union = (end - start) + (end[m] - start[m]) - inter
        iou = inter / union.clamp(min=1e-12)
        threshold = low_threshold + (high_threshold - low_threshold) * (end[m] - start[m])
        decay = alive & (iou > threshold)
        score = torch.where(decay, score * torch.exp(-iou.square() / alpha), score)
    if not keep_idx:
        return proposals.new_zeros((0, 3))
    idx = torch.as_tensor(keep_idx, device=proposals.device)
    return torch.stack([start[idx], end[idx], torch.stack(keep_score)], dim=1)
