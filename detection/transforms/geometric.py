"""SSD-style geometric augmentation that albumentations lacks: zoom out (Expand) and IoU-constrained crops.

Random draws use numpy's global RNG (seeded by the engine), as the core transforms do.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from detection.box_ops import iou_matrix
from detection.registry import TRANSFORMS
from detection.transforms.boxes import clip_and_drop, select
from oars.data.transforms.albu import MASKS_KEY
from oars.data.transforms.geometric import place_masks
from oars.errors import DataError


def _check_range(value: Sequence[float], name: str, low: float) -> tuple[float, float]:
    if len(value) != 2 or not low <= value[0] <= value[1]:
        raise DataError(f'{name} must be (min, max) with {low} <= min <= max, got {value!r}')
    return float(value[0]), float(value[1])


@TRANSFORMS.register_module()
class Expand:
    """Zoom out (SSD's expand, PaddleDetection's RandomExpand): with probability ``prob``, put the image at a
    random place on a canvas ``r`` times its size, ``r ~ U(ratio_range)``, filled with ``mean`` (in the image's
    channel order, BGR for OpenCV images). Boxes and instance masks (``gt_masks``, zero around) are shifted with
    the image."""

    def __init__(self, mean: float | Sequence[float] = (0, 0, 0), ratio_range: Sequence[float] = (1, 4),
                 prob: float = 0.5) -> None:
        self.ratio_range = _check_range(ratio_range, 'Expand.ratio_range', 1.0)
        if not 0 <= prob <= 1:
            raise DataError(f'Expand.prob must be in [0, 1], got {prob!r}')
        self.mean = np.asarray(mean, dtype=np.float64).reshape(-1)
        self.prob = float(prob)

    def __call__(self, results: dict) -> dict:
        if np.random.random_sample() >= self.prob:
            return results
        img = results['img']
        h, w = img.shape[:2]
        ratio = np.random.uniform(*self.ratio_range)
        left = int(np.random.uniform(0, w * ratio - w))
        top = int(np.random.uniform(0, h * ratio - h))
        channels = img.shape[2:]
        if channels and len(self.mean) not in (1, channels[0]):
            raise DataError(f'Expand.mean has {len(self.mean)} values for a {channels[0]}-channel image')
        canvas = np.empty((max(int(h * ratio), h + top), max(int(w * ratio), w + left), *channels), img.dtype)
        canvas[...] = self.mean.astype(img.dtype) if channels else self.mean[0].astype(img.dtype)
        canvas[top:top + h, left:left + w] = img
        results['img'] = canvas
        results['img_shape'] = canvas.shape[:2]
        if results.get('gt_bboxes') is not None:
            results['gt_bboxes'] = (np.asarray(results['gt_bboxes'], dtype=np.float32).reshape(-1, 4)
                                    + np.array([left, top, left, top], dtype=np.float32))
        if results.get(MASKS_KEY) is not None:
            results[MASKS_KEY] = place_masks(np.asarray(results[MASKS_KEY], dtype=np.uint8), canvas.shape[:2], top,
                                             left)
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}(mean={self.mean.tolist()}, ratio_range={self.ratio_range}, prob={self.prob})'


@TRANSFORMS.register_module()
class MinIoURandomCrop:
    """SSD's crop: draw a minimum IoU from ``min_ious`` (or "no crop", or "any overlap"), then up to
    ``max_trials`` windows of ``min_crop_size``..1 times the image size and aspect (h/w) in
    ``aspect_ratio_range``, until one has IoU >= the minimum with every box and holds at least one box centre.
    Boxes whose centre is outside the window are dropped (with labels and flags); the rest are clipped, and
    those that become degenerate are dropped. Images without boxes are left as they are. Instance masks
    (``gt_masks``) are cut to the window and dropped with their boxes.
    """

    def __init__(self, min_ious: Sequence[float] = (0.1, 0.3, 0.5, 0.7, 0.9), min_crop_size: float = 0.3,
                 aspect_ratio_range: Sequence[float] = (0.5, 2.0), max_trials: int = 50) -> None:
        if not all(0 <= v <= 1 for v in min_ious):
            raise DataError(f'MinIoURandomCrop.min_ious must be in [0, 1], got {min_ious!r}')
        if not 0 < min_crop_size <= 1:
            raise DataError(f'MinIoURandomCrop.min_crop_size must be in (0, 1], got {min_crop_size!r}')
        self.min_ious = tuple(float(v) for v in min_ious)
        self.min_crop_size = float(min_crop_size)
        self.aspect_ratio_range = _check_range(aspect_ratio_range, 'MinIoURandomCrop.aspect_ratio_range', 0.0)
        self.max_trials = int(max_trials)
        # 1: keep the image as it is; 0: any window holding a box centre.
        self._modes = (1.0, *self.min_ious, 0.0)

    def _first_window(self, boxes: np.ndarray, h: int, w: int, min_iou: float) -> tuple[np.ndarray, np.ndarray] | None:
        """All ``max_trials`` windows drawn and tested at once; the first that passes (as a loop over trials
        would pick it), with the mask of the boxes whose centre it holds; None when none passes."""
        n = self.max_trials
        new_w = np.random.uniform(self.min_crop_size * w, w, n)
        new_h = np.random.uniform(self.min_crop_size * h, h, n)
        left = np.random.uniform(0.0, 1.0, n) * (w - new_w)
        top = np.random.uniform(0.0, 1.0, n) * (h - new_h)
        patches = np.stack([left, top, left + new_w, top + new_h], axis=1).astype(np.int64).astype(np.float32)
        aspect = new_h / new_w
        ok = (aspect >= self.aspect_ratio_range[0]) & (aspect <= self.aspect_ratio_range[1])
        ok &= (patches[:, 2] > patches[:, 0]) & (patches[:, 3] > patches[:, 1])
        ok &= iou_matrix(patches, boxes).min(axis=1) >= min_iou
        centres = (boxes[:, :2] + boxes[:, 2:]) / 2
        inside = ((centres[None] > patches[:, None, :2]) & (centres[None] < patches[:, None, 2:])).all(axis=2)
        ok &= inside.any(axis=1)
        if not ok.any():
            return None
        first = int(np.argmax(ok))
        return patches[first].astype(np.int64), inside[first]

    def __call__(self, results: dict) -> dict:
        if results.get('gt_bboxes') is None or len(results['gt_bboxes']) == 0:
            return results
        boxes = np.asarray(results['gt_bboxes'], dtype=np.float32).reshape(-1, 4)
        h, w = results['img'].shape[:2]
        while True:  # ends: each round picks "keep the image" with probability 1 / len(modes)
            min_iou = self._modes[np.random.randint(len(self._modes))]
            if min_iou == 1.0:
                return results
            found = self._first_window(boxes, h, w, min_iou)
            if found is None:
                continue
            (x1, y1, x2, y2), inside = found
            results['img'] = np.ascontiguousarray(results['img'][y1:y2, x1:x2])
            results['img_shape'] = (int(y2 - y1), int(x2 - x1))
            results['gt_bboxes'] = boxes - np.array([x1, y1, x1, y1], dtype=np.float32)
            results = select(results, inside)
            if results.get(MASKS_KEY) is not None:  # the kept boxes' masks only
                results[MASKS_KEY] = np.ascontiguousarray(results[MASKS_KEY][:, y1:y2, x1:x2])
            return clip_and_drop(results, results['img_shape'])

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(min_ious={self.min_ious}, min_crop_size={self.min_crop_size}, '
                f'aspect_ratio_range={self.aspect_ratio_range}, max_trials={self.max_trials})')
