"""Overlap of 1-D segments (temporal IoU and intersection over anchor), broadcasting like torch ops."""

from __future__ import annotations

from torch import Tensor


def _intersection(a_start: Tensor, a_end: Tensor, b_start: Tensor, b_end: Tensor) -> Tensor:
    return (a_end.minimum(b_end) - a_start.maximum(b_start)).clamp(min=0)


def segment_iou(a_start: Tensor, a_end: Tensor, b_start: Tensor, b_end: Tensor) -> Tensor:
    """Temporal IoU of segments ``[a_start, a_end]`` and ``[b_start, b_end]``.

    Args:
        a_start, a_end, b_start, b_end: float tensors of broadcastable shapes (any unit, e.g. normalised time).

    Returns:
        Tensor: the broadcast shape, ``|a ∩ b| / |a ∪ b|``; 0 where the union is empty (two zero-length segments).
    """
    inter = _intersection(a_start, a_end, b_start, b_end)
    union = (a_end - a_start) + (b_end - b_start) - inter
    return inter / union.clamp(min=1e-12) * (union > 0)


def segment_ioa(a_start: Tensor, a_end: Tensor, b_start: Tensor, b_end: Tensor) -> Tensor:
    """Intersection over the first segment's length, ``|a ∩ b| / |a|`` (MMAction2's ``temporal_iop``): how much
    of anchor ``a`` a ground-truth region ``b`` covers, which is what BMN's start/end targets measure.

    Args:
        a_start, a_end: the anchors (float, broadcastable with ``b_*``; ``a_end > a_start``).
        b_start, b_end: the regions.

    Returns:
        Tensor: the broadcast shape, in [0, 1].
    """
    return _intersection(a_start, a_end, b_start, b_end) / (a_end - a_start).clamp(min=1e-12)
