"""Paste fixed-size RoI mask probabilities (28x28, a Mask R-CNN's mask output) into the image: the one paste.

Why one implementation, here in the runtime: the eager Mask R-CNN (evaluation, ``tools/infer.py``), the exported
graph's Python predictor and the C++ predictor (the same formulas) must paste alike, or deployed masks drift from
the evaluated ones. The runtime never imports torch, while training code may import the runtime, so the one
paste is this NumPy module; the models call it through a thin tensor adapter
(``detection.models.roi_heads.mask_paste``: tensors to NumPy and back, no arithmetic of its own). The tests prove
it equal to the formulations it replaced: a whole-image ``grid_sample`` paste (``mode='mmdet'``, to 1e-6) and
torchvision's ``paste_masks_in_image`` (``mode='torchvision'``, to 1e-5 and binary-equal).

``mode='mmdet'`` is ``grid_sample``'s sampling (bilinear, ``align_corners=False``, zero padding): the mask's pixel
grid is laid over the box, every image pixel whose centre lies inside the box takes the bilinear sample at its
centre (values fade to 0 over the box's outermost half mask-pixel), pixels centred outside the box are 0, and
the mask is ``prob >= threshold``.

``mode='torchvision'`` (``FCNMaskHead.paste_mode`` of converted torchvision weights) pastes as torchvision's
``paste_masks_in_image``: the mask padded with one zero pixel per side, its box widened by ``(M + 2) / M`` and
truncated to integers, the padded mask resized (``F.interpolate`` bilinear, ``align_corners=False``) onto the
integer box's pixels, last row and column included.

Bilinear sampling on a grid is separable: the window of a box is ``Wy @ mask @ Wx.T`` with ``Wy [h, M_h]`` and
``Wx [w, M_w]`` holding each row's / column's (at most two) interpolation weights. One small matrix product per
detection over its box's window only (cost follows the box area, not the image).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

PASTE_MODES = ("mmdet", "torchvision")  # deploy.yaml postprocess.masks.paste (the mask head's paste_mode)


def _axis_weights(start: int, stop: int, lo: float, hi: float, size: int) -> np.ndarray:
    """Interpolation weights ``[stop - start, size]`` of image pixels ``start..stop-1`` along one axis of a box
    ``[lo, hi]`` over a mask axis of ``size`` cells (``grid_sample``'s ``align_corners=False`` frame, zeros
    outside the mask); rows of pixels centred outside the box are 0."""
    centres = np.arange(start, stop, dtype=np.float32) + np.float32(0.5)
    g = (centres - np.float32(lo)) / np.float32(hi - lo) * np.float32(2) - np.float32(1)
    u = ((g + np.float32(1)) * np.float32(size) - np.float32(1)) / np.float32(2)
    i0 = np.floor(u).astype(np.int64)
    frac = (u - i0).astype(np.float32)
    rows = np.arange(len(u))
    weights = np.zeros((len(u), size + 2), dtype=np.float32)  # columns -1 and size hold the zero padding
    weights[rows, np.clip(i0, -1, size) + 1] = np.float32(1) - frac  # the two taps differ for rows kept below
    weights[rows, np.clip(i0 + 1, -1, size) + 1] = frac
    weights = weights[:, 1:-1]
    weights[np.abs(g) > 1] = 0
    return weights


def _interpolate_weights(start: int, stop: int, b0: int, b1: int, size: int) -> np.ndarray:
    """torchvision mode: weights ``[stop - start, size]`` of image pixels ``start..stop-1`` for a mask axis of
    ``size`` resized by ``F.interpolate`` (bilinear, ``align_corners=False``) onto the integer box pixels
    ``b0..b1`` (inclusive; at least one pixel); rows outside them are 0."""
    length = max(b1 - b0 + 1, 1)
    dst = np.arange(start, stop, dtype=np.int64) - b0
    scale = np.float32(size) / np.float32(length)
    src = np.maximum(scale * (dst.astype(np.float32) + np.float32(0.5)) - np.float32(0.5), np.float32(0))
    i0 = np.minimum(np.floor(src).astype(np.int64), size - 1)
    w1 = np.clip(src - i0.astype(np.float32), 0, 1).astype(np.float32)
    i1 = np.where(i0 < size - 1, i0 + 1, i0)
    rows = np.arange(len(dst))
    weights = np.zeros((len(dst), size), dtype=np.float32)
    weights[rows, i0] = np.float32(1) - w1
    weights[rows, i1] += w1
    weights[(dst < 0) | (dst >= length)] = 0
    return weights


def _paste_torchvision(mask_probs: np.ndarray, boxes: np.ndarray, h: int, w: int,
                       threshold: float | None) -> np.ndarray:
    out = np.zeros((len(boxes), h, w), dtype=np.float32 if threshold is None else bool)
    m = mask_probs.shape[-1]
    padded = np.pad(mask_probs, ((0, 0), (1, 1), (1, 1)))
    scale = np.float32(m + 2) / np.float32(m)
    half = (boxes[:, 2:] - boxes[:, :2]) * np.float32(0.5) * scale
    centre = (boxes[:, 2:] + boxes[:, :2]) * np.float32(0.5)
    ints = np.concatenate([centre - half, centre + half], axis=1).astype(np.int64)  # truncated toward zero
    for k, (x1, y1, x2, y2) in enumerate(ints):  # per detection: two small matrix products on its window
        xa, ya, xb, yb = max(x1, 0), max(y1, 0), min(max(x2, x1) + 1, w), min(max(y2, y1) + 1, h)
        if xb <= xa or yb <= ya:
            continue
        wy = _interpolate_weights(int(ya), int(yb), int(y1), int(y2), padded.shape[1])
        wx = _interpolate_weights(int(xa), int(xb), int(x1), int(x2), padded.shape[2])
        window = wy @ padded[k] @ wx.T
        out[k, ya:yb, xa:xb] = window if threshold is None else window >= threshold
    return out


def paste_masks(mask_probs: np.ndarray, boxes: np.ndarray, img_shape: Sequence[int],
                threshold: float | None = 0.5, mode: str = "mmdet") -> np.ndarray:
    """Paste each detection's mask over its box into an image of ``img_shape``.

    Args:
        mask_probs: float ``[K, M_h, M_w]`` probabilities (the graph's ``masks[i, :num_dets[i]]``).
        boxes: float ``[K, 4]`` xyxy boxes in the target image's pixels (original image pixels).
        img_shape: ``(H, W)`` of the target image.
        threshold: masks are ``prob >= threshold`` (``postprocess.masks.threshold``, MMDetection's
            ``mask_thr_binary``); None returns the float32 probabilities.
        mode: ``'mmdet'`` or ``'torchvision'`` (see the module docstring).

    Returns:
        bool ``[K, H, W]`` (float32 with ``threshold=None``). A box of zero width or height pastes nothing.
    """
    mask_probs = np.asarray(mask_probs, dtype=np.float32)
    boxes = np.asarray(boxes, dtype=np.float32).reshape(-1, 4)
    if mask_probs.ndim != 3 or len(boxes) != len(mask_probs):
        raise ValueError(f"paste_masks: expected mask_probs [K, h, w] and boxes [K, 4], got "
                         f"{mask_probs.shape} and {boxes.shape}")
    if mode not in PASTE_MODES:
        raise ValueError(f"paste_masks: mode={mode!r} is invalid; accepted: {list(PASTE_MODES)}")
    h, w = int(img_shape[0]), int(img_shape[1])
    if mode == "torchvision":
        return _paste_torchvision(mask_probs, boxes, h, w, threshold)
    out = np.zeros((len(boxes), h, w), dtype=np.float32 if threshold is None else bool)
    mh, mw = mask_probs.shape[1:]
    lo = np.clip(np.floor(boxes[:, :2]), 0, None).astype(np.int64)
    hi = np.minimum(np.ceil(boxes[:, 2:]), [w, h]).astype(np.int64)
    for k, (x1, y1, x2, y2) in enumerate(boxes):  # per detection: two small matrix products on its window
        (xa, ya), (xb, yb) = lo[k], hi[k]
        if xb <= xa or yb <= ya or not (x2 > x1 and y2 > y1):
            continue
        wy = _axis_weights(int(ya), int(yb), float(y1), float(y2), mh)
        wx = _axis_weights(int(xa), int(xb), float(x1), float(x2), mw)
        window = wy @ mask_probs[k] @ wx.T
        out[k, ya:yb, xa:xb] = window if threshold is None else window >= threshold
    return out
