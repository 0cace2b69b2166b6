"""Arrange images for reports: captioned panels side by side, grids, and whole-factor enlargement of small images."""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np


def _to_bgr(img: np.ndarray, where: str) -> np.ndarray:
    img = np.asarray(img)
    if img.dtype != np.uint8:
        raise ValueError(f'{where}: images must be uint8, got dtype {img.dtype}')
    if img.ndim == 2 or (img.ndim == 3 and img.shape[2] == 1):
        return cv2.cvtColor(img.reshape(img.shape[:2]), cv2.COLOR_GRAY2BGR)
    if img.ndim == 3 and img.shape[2] == 3:
        return img
    raise ValueError(f'{where}: images must be (H, W) or (H, W, 3), got shape {tuple(img.shape)}')


def enlarge_factor(height: int, width: int, min_side: int) -> int:
    """The smallest whole factor that brings the shorter of ``height`` and ``width`` to at least ``min_side``.

    Why whole factors: pictures of small images (the 128-px demo shapes, 64-px GAN outputs) are enlarged *before*
    boxes, captions and legends are drawn on them, so text keeps a readable size; a whole factor with nearest
    neighbour keeps every source pixel a crisp square and class masks exact.

    Returns:
        int >= 1 (1 when the image is already large enough or ``min_side <= 0``).
    """
    short = max(1, min(int(height), int(width)))
    return max(1, -(-int(min_side) // short))


def enlarge(img: np.ndarray, factor: int) -> np.ndarray:
    """Repeat every pixel ``factor`` times along H and W (nearest neighbour, exact for class-id maps).

    Args:
        img: ``[H, W]`` or ``[H, W, C]`` array of any dtype (images, class-id maps).
        factor: whole factor >= 1.

    Returns:
        ``[H * factor, W * factor(, C)]`` array of ``img``'s dtype (``img`` itself when ``factor`` is 1).
    """
    if factor <= 1:
        return img
    return np.asarray(img).repeat(factor, axis=0).repeat(factor, axis=1)


def side_by_side(panels: Sequence[np.ndarray], titles: Sequence[str], gap: int = 4) -> np.ndarray:
    """Resize panels to the tallest one's height (aspect kept), caption each above, join left to right.

    Upscaling uses nearest neighbour so class masks stay crisp; downscaling uses area averaging.
    Grayscale panels become BGR. Output height is the common height plus the caption bar.
    """
    if len(panels) == 0:
        raise ValueError('side_by_side: no panels given')
    if len(titles) != len(panels):
        raise ValueError(f'side_by_side: {len(panels)} panels but {len(titles)} titles')
    imgs = [_to_bgr(p, f'side_by_side panel {i}') for i, p in enumerate(panels)]
    height = max(im.shape[0] for im in imgs)
    resized = []
    for im in imgs:
        h, w = im.shape[:2]
        if h != height:
            new_w = max(1, int(round(w * height / h)))
            interp = cv2.INTER_NEAREST if height > h else cv2.INTER_AREA
            im = cv2.resize(im, (new_w, height), interpolation=interp)
        resized.append(im)

    scale = min(max(height / 300.0, 0.35), 1.0)
    font, thick = cv2.FONT_HERSHEY_SIMPLEX, 1
    (_, text_h), base = cv2.getTextSize('Ag', font, scale, thick)
    bar = text_h + base + 8
    cols = []
    for im, title in zip(resized, titles):
        col = np.zeros((bar + height, im.shape[1], 3), dtype=np.uint8)
        col[bar:] = im
        cv2.putText(col, str(title), (3, 4 + text_h), font, scale, (255, 255, 255), thick, cv2.LINE_AA)
        cols.append(col)
        cols.append(np.zeros((bar + height, gap, 3), dtype=np.uint8))
    return np.concatenate(cols[:-1], axis=1)


def make_grid(images: Sequence[np.ndarray], ncols: int, pad: int = 4, pad_value: int = 0) -> np.ndarray:
    """Tile images row by row into ``ceil(n / ncols)`` rows, with ``pad`` pixels between and around.

    Cells take the largest height and width; smaller images sit top-left in their cell. Grayscale
    images become BGR. Output shape: ``(rows * h + (rows + 1) * pad, cols * w + (cols + 1) * pad, 3)``
    with ``cols = min(ncols, n)``.
    """
    if len(images) == 0:
        raise ValueError('make_grid: no images given')
    if isinstance(ncols, bool) or not isinstance(ncols, int | np.integer) or ncols < 1:
        raise ValueError(f'make_grid: ncols must be a positive integer, got {ncols!r}')
    if pad < 0:
        raise ValueError(f'make_grid: pad must be >= 0, got {pad}')
    imgs = [_to_bgr(im, f'make_grid image {i}') for i, im in enumerate(images)]
    cols = min(int(ncols), len(imgs))
    rows = -(-len(imgs) // cols)
    h = max(im.shape[0] for im in imgs)
    w = max(im.shape[1] for im in imgs)
    grid = np.full((rows * h + (rows + 1) * pad, cols * w + (cols + 1) * pad, 3), pad_value, dtype=np.uint8)
    for i, im in enumerate(imgs):
        r, c = divmod(i, cols)
        y, x = pad + r * (h + pad), pad + c * (w + pad)
        grid[y: y + im.shape[0], x: x + im.shape[1]] = im
    return grid
