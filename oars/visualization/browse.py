"""Shared pieces of ``tools/browse_dataset.py`` pictures: turning a packed pipeline image back into a BGR array
and enlarging small ones so that the captions drawn on them stay readable.

Why in the core: every task's ``Data.draw_pipeline_sample`` starts from the same packed ``inputs`` tensor
(``Pack*Inputs``: uint8 ``[C, H, W]``) and must make pictures of the same minimum size.
"""

from __future__ import annotations

import math
from typing import Any

import cv2
import numpy as np

MIN_LONG_SIDE = 512  # pictures smaller than this on their long side are enlarged before text is drawn


def upscale_factor(shape: tuple[int, ...], min_long_side: int = MIN_LONG_SIDE) -> int:
    """The smallest whole factor that brings the long side of an image of ``shape`` (H, W, ...) to at least
    ``min_long_side`` (1 when it already is). Whole factors keep label pixels square under nearest resizing."""
    long_side = max(1, int(max(shape[0], shape[1])))
    return max(1, math.ceil(min_long_side / long_side))


def enlarge(img: np.ndarray, factor: int, nearest: bool = False) -> np.ndarray:
    """``img`` (H x W [x C]) resized by the whole ``factor``: bilinear for photos, nearest (``nearest``) for
    label maps, whose values are class ids and must not be blended. Returns ``img`` itself for factor 1."""
    if factor <= 1:
        return img
    interp = cv2.INTER_NEAREST if nearest else cv2.INTER_LINEAR
    return cv2.resize(img, (img.shape[1] * factor, img.shape[0] * factor), interpolation=interp)


def packed_image(inputs: Any, rgb: bool = False, where: str = "inputs") -> np.ndarray:
    """One packed image as a drawable array.

    Args:
        inputs: uint8 (or float in 0..255) tensor/array ``[C, H, W]`` with C = 1 or 3, as ``Pack*Inputs`` made it.
        rgb: the pipeline's channel order is RGB (GAN pipelines); the default is OpenCV's BGR.
        where: what to name in the error.

    Returns:
        uint8 [H, W, 3] BGR (contiguous).

    Raises:
        ValueError: another shape, naming ``where`` and the shape.
    """
    arr = inputs.detach().cpu().numpy() if hasattr(inputs, "detach") else np.asarray(inputs)
    if arr.ndim != 3 or arr.shape[0] not in (1, 3):
        raise ValueError(f"{where}: expected one packed image [C, H, W] with C = 1 or 3, got shape "
                         f"{tuple(arr.shape)}")
    if arr.dtype != np.uint8:
        arr = np.clip(np.rint(arr.astype(np.float32)), 0, 255).astype(np.uint8)
    img = arr.transpose(1, 2, 0)
    if img.shape[2] == 1:
        return cv2.cvtColor(np.ascontiguousarray(img[..., 0]), cv2.COLOR_GRAY2BGR)
    return np.ascontiguousarray(img[..., ::-1] if rgb else img)
