"""A feature sequence resized to the localiser's temporal scale: linear interpolation along time (the training
pipeline's ``ResizeTemporal`` runs these functions, so training and deployment resample identically)."""

from __future__ import annotations

import numpy as np


def resize_positions(length: int, size: int, align_corners: bool) -> np.ndarray:
    """Source positions (float64 [size], in ``[0, length - 1]``) of the ``size`` output steps.

    ``align_corners=False``: step j is centred at ``(j + 0.5) / size`` of the video, as snippet t is at
    ``(t + 0.5) / length`` (``F.interpolate``'s half-pixel rule, clipped at the ends); ``True``: the first and
    last steps sit on the first and last snippets.
    """
    if align_corners:
        return np.linspace(0.0, length - 1.0, size) if size > 1 else np.zeros(1)
    return np.clip((np.arange(size) + 0.5) * (length / size) - 0.5, 0.0, length - 1.0)


def resize_temporal(features: np.ndarray, size: int, align_corners: bool = False) -> np.ndarray:
    """Linear interpolation of a T x C sequence to ``size`` steps (each channel as ``np.interp``).

    Args:
        features: float [T, C], T >= 1.
        size: the output length.
        align_corners: see :func:`resize_positions`.

    Returns:
        np.ndarray: float32 [size, C].
    """
    feat = np.asarray(features, dtype=np.float32)
    length = feat.shape[0]
    pos = resize_positions(length, size, align_corners)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, length - 1)
    w = (pos - lo).astype(np.float32)[:, None]
    return (feat[lo] * (1.0 - w) + feat[hi] * w).astype(np.float32)
