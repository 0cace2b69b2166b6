"""Instance masks as COCO run-length encodings, uncompressed (``{'size': [H, W], 'counts': [n0, n1, ...]}``:
alternating runs of 0s and 1s in column-major order, starting with 0s), which ``pycocotools.mask.frPyObjects``
reads; NumPy only (the runtime has no pycocotools).
"""

from __future__ import annotations

import numpy as np


def mask_to_rle(mask: np.ndarray) -> dict:
    """COCO uncompressed RLE of one mask.

    Args:
        mask: bool (or 0/1) [H, W].

    Returns:
        ``{'size': [H, W], 'counts': list[int]}``: run lengths over the column-major pixels, the first run
        counting 0s (0 when the first pixel is set); the counts sum to ``H * W``.
    """
    mask = np.asarray(mask)
    if mask.ndim != 2:
        raise ValueError(f"mask_to_rle: expected an [H, W] mask, got shape {mask.shape}")
    flat = (mask.T.reshape(-1) > 0).astype(np.int8)  # column-major: COCO's order
    if flat.size == 0:
        return {"size": [int(mask.shape[0]), int(mask.shape[1])], "counts": []}
    bounds = np.concatenate([[0], np.flatnonzero(np.diff(flat)) + 1, [flat.size]])
    counts = np.diff(bounds)
    if flat[0]:
        counts = np.concatenate([[0], counts])
    return {"size": [int(mask.shape[0]), int(mask.shape[1])], "counts": [int(c) for c in counts]}


def rle_to_mask(rle: dict) -> np.ndarray:
    """bool [H, W] of an uncompressed RLE written by :func:`mask_to_rle` (its inverse)."""
    h, w = (int(v) for v in rle["size"])
    counts = np.asarray(rle["counts"], dtype=np.int64)
    if counts.sum() != h * w:
        raise ValueError(f"rle_to_mask: counts sum to {int(counts.sum())}, the size {h}x{w} needs {h * w}")
    values = np.arange(len(counts)) % 2 == 1  # runs alternate 0, 1, 0, ...
    return np.repeat(values, counts).reshape(w, h).T.copy()
