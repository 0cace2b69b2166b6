"""Class-id maps as 8-bit palette PNGs, written with the standard library (zlib) instead of PIL.

Why not PIL: the deploy runtime depends only on numpy, OpenCV, PyYAML and ONNX Runtime, and OpenCV cannot write
palette PNGs (it writes the colours, losing the class ids). A palette PNG is a handful of chunks: IHDR (8-bit,
colour type 3), PLTE (256 RGB entries), IDAT (zlib of the rows, each after a filter byte 0), IEND. The settings are
Pillow's for mode "P" (no row filter, zlib level 6 with memLevel 9, IDAT chunks of 64 KiB), so the files are the
bytes ``PIL.Image.save`` wrote before for images up to 16384 pixels wide (tests/deploy/test_draw_label_png.py).
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Sequence

import numpy as np

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
IDAT_CHUNK = 65536  # Pillow's encoder buffer: one IDAT chunk per 64 KiB of compressed data
IGNORE_COLOUR = (255, 255, 255)  # id 255 (ignore) is shown white


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def encode_palette_png(index: np.ndarray, palette: np.ndarray) -> bytes:
    """PNG bytes of an ``[H, W]`` uint8 index image with a ``[256, 3]`` uint8 RGB palette."""
    h, w = index.shape
    rows = np.zeros((h, w + 1), dtype=np.uint8)  # column 0: filter type 0 (None) for every row
    rows[:, 1:] = index
    compressor = zlib.compressobj(6, zlib.DEFLATED, 15, 9)
    data = compressor.compress(rows.tobytes()) + compressor.flush()
    idat = b"".join(_chunk(b"IDAT", data[i:i + IDAT_CHUNK]) for i in range(0, len(data), IDAT_CHUNK))
    header = struct.pack(">IIBBBBB", w, h, 8, 3, 0, 0, 0)  # 8-bit, palette, deflate, adaptive filters, no interlace
    return (PNG_SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"PLTE", palette.astype(np.uint8).tobytes())
            + idat + _chunk(b"IEND", b""))


def save_label_png(label: np.ndarray, palette: Sequence[Sequence[int]] | np.ndarray, path: str | os.PathLike) -> None:
    """Class ids as an 8-bit palette PNG: the pixel values stay class indices (read them back with
    PIL, not OpenCV, which returns the colours), viewers show the class colours; 255 (ignore) is white.

    Args:
        label: ``[H, W]`` integer class ids in [0, 255].
        palette: one RGB row per class (at most 256; entry 255 is always the white ignore colour).
        path: the .png file to write.

    Raises:
        ValueError: ``label`` is not 2-D integers in [0, 255], or the palette has more than 256 rows.
    """
    label = np.asarray(label)
    if label.ndim != 2 or not (np.issubdtype(label.dtype, np.integer) or label.dtype == bool):
        raise ValueError(f"save_label_png({path}): label must be an [H, W] integer array, got {label.dtype} "
                         f"{label.shape}")
    if label.size and (label.min() < 0 or label.max() > 255):
        raise ValueError(f"save_label_png({path}): class ids must be in [0, 255] for an 8-bit PNG, got "
                         f"[{label.min()}, {label.max()}]")
    pal = np.asarray(palette, dtype=np.uint8).reshape(-1, 3)
    if len(pal) > 256:
        raise ValueError(f"save_label_png({path}): an 8-bit PNG holds at most 256 colours, got {len(pal)}")
    table = np.zeros((256, 3), dtype=np.uint8)
    table[: len(pal)] = pal
    table[255] = IGNORE_COLOUR
    with open(path, "wb") as f:
        f.write(encode_palette_png(label.astype(np.uint8), table))
