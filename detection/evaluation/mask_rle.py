"""Instance masks <-> COCO run-length encoding (pycocotools), so that evaluation keeps a few hundred bytes per
mask instead of the full bitmap: CocoMetric and the report encode each image's masks as they come in.

An RLE here is ``{'size': [H, W], 'counts': str}`` (compressed, JSON-ready: the COCO results format).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from pycocotools import mask as mask_utils


def as_numpy_masks(masks: Any, where: str = 'masks') -> np.ndarray:
    """A torch tensor or array of K masks [K, H, W] (bool or 0/1 integers) as a bool numpy array [K, H, W]."""
    if hasattr(masks, 'detach'):  # torch tensor, maybe on the GPU
        masks = masks.detach().cpu().numpy()
    masks = np.asarray(masks)
    if masks.ndim != 3:
        raise ValueError(f'{where} must be [K, H, W] masks, got shape {tuple(masks.shape)}')
    return masks if masks.dtype == bool else masks > 0


def encode_masks(masks: np.ndarray) -> list[dict[str, Any]]:
    """COCO RLEs of K masks.

    Args:
        masks: bool (or 0/1) [K, H, W].

    Returns:
        K dicts ``{'size': [H, W], 'counts': str}``; one ``pycocotools.mask.encode`` call for all of them
        (it wants a Fortran-ordered uint8 [H, W, K] array: one copy).
    """
    masks = np.asarray(masks)
    if len(masks) == 0:
        return []
    fortran = np.asfortranarray(masks.astype(np.uint8, copy=False).transpose(1, 2, 0))
    rles = mask_utils.encode(fortran)
    for rle in rles:
        rle['counts'] = rle['counts'].decode('ascii')
    return rles


def decode_masks(rles: Sequence[dict[str, Any]], shape: tuple[int, int]) -> np.ndarray:
    """bool [K, H, W] masks of K RLEs of a ``shape`` (H, W) image (``[0, H, W]`` for none); one ``decode`` call."""
    if len(rles) == 0:
        return np.zeros((0, int(shape[0]), int(shape[1])), dtype=bool)
    return np.ascontiguousarray(mask_utils.decode(list(rles)).transpose(2, 0, 1)).astype(bool)
