"""Box bookkeeping shared by the detection transforms that move boxes themselves.

Every such transform ends with :func:`clip_and_drop`: boxes are clipped to the image and the ones that
became degenerate are dropped with their labels, ignore flags and instance masks, by the same rule
albumentations applies in the core adapter (``oars.data.transforms.albu.valid_boxes``, ``MIN_BOX_SIZE``).
"""

from __future__ import annotations

import numpy as np

from detection.box_ops import clip_boxes
from oars.data.transforms.albu import BOX_ALIGNED_KEYS, BOX_KEY, MASKS_KEY, valid_boxes

# Every key indexed with the boxes: boxes, labels, ignore flags and instance masks (gt_masks [N, H, W]).
BOX_FIELDS: tuple[str, ...] = (BOX_KEY, *BOX_ALIGNED_KEYS)
# What box_fields() returns (the per-box keys without pixels).
BOX_ARRAY_KEYS: tuple[str, ...] = tuple(k for k in BOX_FIELDS if k != MASKS_KEY)


def box_fields(results: dict) -> dict[str, np.ndarray]:
    """``gt_bboxes`` float32 [N, 4], ``gt_bboxes_labels`` int64 [N], ``gt_ignore_flags`` bool [N] of ``results``
    (empty arrays when a key is missing), so that samples can be concatenated."""
    boxes = np.asarray(results.get(BOX_KEY, np.zeros((0, 4))), dtype=np.float32).reshape(-1, 4)
    n = len(boxes)
    labels = np.asarray(results.get('gt_bboxes_labels', np.zeros(n)), dtype=np.int64).reshape(-1)
    flags = np.asarray(results.get('gt_ignore_flags', np.zeros(n)), dtype=bool).reshape(-1)
    if len(labels) != n or len(flags) != n:
        raise ValueError(f'{results.get("img_path", "a sample")}: {n} gt_bboxes but {len(labels)} gt_bboxes_labels '
                         f'and {len(flags)} gt_ignore_flags; they must be aligned')
    return {BOX_KEY: boxes, 'gt_bboxes_labels': labels, 'gt_ignore_flags': flags}


def select(results: dict, keep: np.ndarray) -> dict:
    """Index the boxes and every box-aligned key present in ``results`` (labels, ignore flags, ``gt_masks``
    [N, H, W] along N) with ``keep`` (bool [N] or indices)."""
    for key in BOX_FIELDS:
        if results.get(key) is not None:
            results[key] = np.asarray(results[key])[keep]
    return results


def clip_and_drop(results: dict, shape: tuple[int, int]) -> dict:
    """Clip ``results['gt_bboxes']`` to ``shape`` (H, W) and drop degenerate boxes with their labels, flags and
    masks. (Masks are not clipped: they are already cut to the image by the transform that moved them.)"""
    if results.get(BOX_KEY) is None:
        return results
    boxes = clip_boxes(np.asarray(results[BOX_KEY], dtype=np.float32).reshape(-1, 4), shape)
    results[BOX_KEY] = boxes
    return select(results, valid_boxes(boxes))
