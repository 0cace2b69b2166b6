"""Class colour palettes: deterministic distinct colours, or a validated user palette.

Palettes are RGB rows (as in dataset metainfo and palette PNGs, see ``label_png``); the drawing functions
convert to BGR where they paint on OpenCV images.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _bit_interleaved(num_classes: int) -> np.ndarray:
    """The PASCAL VOC palette generalised to any length: id bits spread over R, G, B from the top bit down.

    Distinct for every id below 2**24, class 0 is black, and small ids get far-apart colours.
    """
    ids = np.arange(num_classes, dtype=np.int64)
    out = np.zeros((num_classes, 3), dtype=np.int64)
    for j in range(8):
        for ch in range(3):
            out[:, ch] |= ((ids >> (3 * j + ch)) & 1) << (7 - j)
    return out.astype(np.uint8)


def get_palette(num_classes: int, palette: Sequence[Sequence[int]] | np.ndarray | None = None) -> np.ndarray:
    """Return an ``[num_classes, 3]`` uint8 RGB palette.

    Without ``palette`` the colours are the deterministic bit-interleaved (VOC-style) ones. A given
    palette must have exactly ``num_classes`` rows of 3 integers in [0, 255]; anything else raises
    ``ValueError`` naming the offending row or value.
    """
    if isinstance(num_classes, bool) or not isinstance(num_classes, int | np.integer) or num_classes < 1:
        raise ValueError(f'get_palette: num_classes must be a positive integer, got {num_classes!r}')
    num_classes = int(num_classes)
    if num_classes > 2**24:
        raise ValueError(f'get_palette: at most {2**24} distinct colours exist, asked for {num_classes}')
    if palette is None:
        return _bit_interleaved(num_classes)
    try:
        arr = np.asarray(palette)
    except ValueError as err:  # ragged nested lists
        raise ValueError(f'get_palette: palette rows must each hold 3 values (R, G, B): {err}') from None
    if arr.ndim != 2 or arr.shape[1] != 3:
        raise ValueError(f'get_palette: palette must have shape [num_classes, 3] (R, G, B rows), '
                         f'got shape {tuple(arr.shape)}')
    if arr.shape[0] != num_classes:
        raise ValueError(f'get_palette: palette has {arr.shape[0]} colours but there are {num_classes} classes')
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f'get_palette: palette values must be integers in [0, 255], got dtype {arr.dtype}')
    bad = ~np.isfinite(arr) | (arr < 0) | (arr > 255) | (arr != np.round(arr))
    if bad.any():
        row, col = (int(v) for v in np.argwhere(bad)[0])
        raise ValueError(f'get_palette: palette[{row}][{col}] = {arr[row, col].item()!r} is not an integer in [0, 255] '
                         f'(row {row}: {arr[row].tolist()})')
    return arr.astype(np.uint8)
