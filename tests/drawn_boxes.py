"""Test helpers for box-moving transforms: draw a rectangle at each box, then check that after a transform every
box still bounds the pixels of the rectangle drawn at it (importable: tests/ is on pythonpath)."""

from __future__ import annotations

import numpy as np

COLOURS = [255, 215, 175, 135, 95]  # grey level of the rectangle drawn for label 0..4

DEFAULT_BOXES = [[6, 8, 22, 30], [36, 6, 58, 20], [30, 36, 50, 58]]


def make_results(h: int = 64, w: int = 64, boxes=None, labels=None, channel: int | None = None, ignore=None,
                 img_path: str = 'toy.png') -> dict:
    """A black BGR image with a filled rectangle (grey level COLOURS[label], in one channel or all) at each
    integer box, as a pipeline results dict."""
    if boxes is None:
        boxes, labels = DEFAULT_BOXES, [0, 1, 2]
    boxes = np.asarray(boxes, np.float32).reshape(-1, 4)
    labels = np.asarray(labels if labels is not None else [0] * len(boxes), np.int64)
    img = np.zeros((h, w, 3), np.uint8)
    for (x1, y1, x2, y2), lab in zip(boxes.astype(int), labels):
        if channel is None:
            img[y1:y2, x1:x2] = COLOURS[lab]
        else:
            img[y1:y2, x1:x2, channel] = COLOURS[lab]
    flags = np.zeros(len(boxes), bool) if ignore is None else np.asarray(ignore, bool)
    return dict(img=img, img_path=img_path, img_id=1, ori_shape=(h, w), img_shape=(h, w),
                gt_bboxes=boxes, gt_bboxes_labels=labels, gt_ignore_flags=flags)


def assert_boxes_bound_drawn(img: np.ndarray, boxes: np.ndarray, labels: np.ndarray, tol: float = 1.0,
                             channel: int = 0, gain: float = 1.0, margin: int = 3) -> None:
    """Each box bounds (within ``tol`` px) the pixels brighter than half its label's colour near it."""
    plane = img[..., channel].astype(np.float32) if img.ndim == 3 else img.astype(np.float32)
    h, w = plane.shape
    assert len(boxes) == len(labels)
    for box, lab in zip(np.asarray(boxes), np.asarray(labels)):
        x1, y1, x2, y2 = box
        assert 0 <= x1 < x2 <= w and 0 <= y1 < y2 <= h, f'box {box} outside the {h}x{w} image'
        wx1, wy1 = max(int(np.floor(x1)) - margin, 0), max(int(np.floor(y1)) - margin, 0)
        wx2, wy2 = min(int(np.ceil(x2)) + margin, w), min(int(np.ceil(y2)) + margin, h)
        colour = COLOURS[lab] * gain
        ys, xs = np.nonzero(plane[wy1:wy2, wx1:wx2] > colour / 2)
        assert len(xs), f'no drawn pixels near box {box} (label {lab})'
        drawn = np.array([xs.min() + wx1, ys.min() + wy1, xs.max() + 1 + wx1, ys.max() + 1 + wy1], np.float32)
        assert np.abs(drawn - box).max() <= tol, f'box {box} vs drawn pixels {drawn} (label {lab})'
        inner = plane[int(np.ceil(y1)) + 1:int(np.floor(y2)) - 1, int(np.ceil(x1)) + 1:int(np.floor(x2)) - 1]
        if inner.size:
            assert abs(float(np.median(inner)) - colour) <= 12, f'label {lab} is not the box drawn at {box}'
