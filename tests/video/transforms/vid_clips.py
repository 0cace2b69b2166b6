"""Test clips for the video transforms: frames carrying their pixel position, and clips of identical frames."""

from __future__ import annotations

import numpy as np


def marker_clip(n: int = 4, h: int = 48, w: int = 64) -> list[np.ndarray]:
    """``n`` BGR uint8 frames h x w: channel 0 = x, channel 1 = y, channel 2 = 10 * frame number (w, h <= 256)."""
    y, x = np.mgrid[:h, :w]
    return [np.stack([x, y, np.full_like(x, 10 * t)], axis=-1).astype(np.uint8) for t in range(n)]


def same_frames(n: int = 4, h: int = 48, w: int = 64, seed: int = 0) -> list[np.ndarray]:
    """``n`` copies of one random BGR uint8 frame h x w."""
    frame = np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)
    return [frame.copy() for _ in range(n)]


def assert_frames_identical(imgs) -> None:
    imgs = np.asarray(imgs)
    assert len(imgs) > 1
    assert (imgs == imgs[:1]).all(), 'frames of one clip got different parameters'


def origin(imgs) -> np.ndarray:
    """(x, y) of each output frame's top-left pixel in its source frame: int [N, 2] (from marker_clip)."""
    return np.asarray(imgs)[:, 0, 0, :2].astype(np.int64)
