"""Paint instance masks (Mask R-CNN-style predictions or ground truth) on BGR images, all masks in one blend.

Images are BGR uint8 (OpenCV); palettes are RGB rows (``oars_deploy.draw.palette``), flipped to BGR here.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from oars_deploy.draw.boxes import drawing_order
from oars_deploy.draw.palette import get_palette


def instance_index_map(masks: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Which mask is on top at each pixel.

    Args:
        masks: bool [K, H, W].
        order: int [K'] indices into ``masks``, bottom to top (a mask later in ``order`` covers earlier ones).

    Returns:
        int32 [H, W]: the position in ``order`` of the top mask covering the pixel, -1 where none does. One
        ``argmax`` over the stacked masks (no per-mask loop).
    """
    h, w = masks.shape[1:]
    if len(order) == 0:
        return np.full((h, w), -1, dtype=np.int32)
    stack = masks[order[::-1]]  # top first: argmax finds the first True, i.e. the top mask
    top = len(order) - 1 - np.argmax(stack, axis=0)
    return np.where(stack.any(axis=0), top, -1).astype(np.int32)


def draw_instance_masks(img: np.ndarray, masks: np.ndarray, labels: np.ndarray,
                        palette: np.ndarray | Sequence[Sequence[int]] | None = None, num_classes: int | None = None,
                        scores: np.ndarray | None = None, score_thr: float = 0.0, alpha: float = 0.5,
                        outline: bool = True) -> np.ndarray:
    """Return a copy of ``img`` with each instance mask filled translucently in its class colour.

    Args:
        img: (H, W, 3) uint8 BGR image.
        masks: bool (or 0/1) [K, h, w] masks. When (h, w) is not the image's size (masks in original pixels
            drawn on a resized picture) the composed masks are scaled to it with nearest neighbour.
        labels: int [K] class index of each mask.
        palette: one RGB row per class (``get_palette``'s default when None).
        num_classes: number of classes (default ``len(palette)``, or ``labels.max() + 1`` without a palette).
        scores: float [K] or None; masks with a score below ``score_thr`` are not drawn, and higher scores are
            drawn over lower ones (without scores: later masks over earlier ones).
        alpha: opacity of the fill, in [0, 1]: ``round((1 - alpha) * img + alpha * colour)``.
        outline: also draw each mask's 1-pixel border in its full class colour (tells touching instances of
            one class apart).

    Returns:
        (H, W, 3) uint8 BGR image (a new array; ``img`` is untouched).

    Raises:
        ValueError: shapes or dtypes that do not fit, labels outside the palette, ``alpha`` outside [0, 1].
    """
    img = np.asarray(img)
    if img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] != 3:
        raise ValueError(f'draw_instance_masks: img must be an (H, W, 3) uint8 BGR image, got shape '
                         f'{tuple(img.shape)} dtype {img.dtype}')
    masks = np.asarray(masks)
    if masks.ndim != 3:
        raise ValueError(f'draw_instance_masks: masks must be [K, H, W], got shape {tuple(masks.shape)}')
    masks = masks if masks.dtype == bool else masks > 0
    labels = np.asarray(labels).reshape(-1).astype(np.int64)
    if len(labels) != len(masks):
        raise ValueError(f'draw_instance_masks: {len(masks)} masks but {len(labels)} labels')
    if not 0.0 <= float(alpha) <= 1.0:
        raise ValueError(f'draw_instance_masks: alpha must be in [0, 1], got {alpha}')
    n_cls = int(num_classes) if num_classes is not None else (
        len(palette) if palette is not None else int(labels.max(initial=-1)) + 1)
    if len(labels) and (labels.min() < 0 or labels.max() >= n_cls):
        raise ValueError(f'draw_instance_masks: labels {np.unique(labels).tolist()} outside [0, {n_cls}) '
                         f'for {n_cls} classes')
    out = img.copy()
    if len(masks) == 0:
        return out
    scores, order = drawing_order(scores, len(masks), score_thr, 'draw_instance_masks', 'masks')
    if len(order) == 0:
        return out
    index = instance_index_map(masks, order)
    h, w = out.shape[:2]
    if index.shape != (h, w):
        index = cv2.resize(index.astype(np.float32), (w, h), interpolation=cv2.INTER_NEAREST).astype(np.int32)
    covered = index >= 0
    bgr = get_palette(n_cls, palette)[:, ::-1].astype(np.float32)
    colour = bgr[labels[order]][index[covered]]  # [P, 3] colour of each covered pixel
    blended = np.rint((1.0 - alpha) * out[covered].astype(np.float32) + alpha * colour)
    out[covered] = np.clip(blended, 0, 255).astype(np.uint8)
    if outline:
        padded = np.pad(index, 1, mode='constant', constant_values=-1)
        edge = covered & ((padded[:-2, 1:-1] != index) | (padded[2:, 1:-1] != index)
                          | (padded[1:-1, :-2] != index) | (padded[1:-1, 2:] != index))
        out[edge] = bgr[labels[order]][index[edge]].astype(np.uint8)
    return out
