"""Tracked boxes drawn on a frame: one colour per track id, the caption ``#id class score`` (OpenCV, torch-free).

Why a colour per id rather than per class: the picture must show which box is which object over time; two objects
of one class get different colours, and an object keeps its colour while its id lives. The colours step the hue by
the golden ratio, so consecutive ids differ strongly and the same id always gets the same colour. The boxes are
drawn by :func:`oars_deploy.draw.boxes.draw_boxes`, each track its own "class".
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from oars_deploy.draw.boxes import draw_boxes

GOLDEN = 0.618033988749895


def id_colours(track_ids: np.ndarray) -> np.ndarray:
    """One RGB colour per track id, always the same for an id.

    Args:
        track_ids: int [K] (>= 0).

    Returns:
        uint8 [K, 3] RGB (saturated, bright: visible on most frames).
    """
    ids = np.asarray(track_ids, dtype=np.int64).reshape(-1)
    if not len(ids):  # OpenCV refuses an empty image
        return np.zeros((0, 3), np.uint8)
    hue = ((ids * GOLDEN) % 1.0 * 180).astype(np.uint8)  # OpenCV's hue is 0..179
    hsv = np.stack([hue, np.full_like(hue, 220), np.full_like(hue, 255)], axis=1)[None]
    return cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)[0]


def draw_tracks(img: np.ndarray, boxes: np.ndarray, track_ids: np.ndarray, labels: np.ndarray,
                scores: np.ndarray, class_names: Sequence[str]) -> np.ndarray:
    """A copy of ``img`` with the tracked detections drawn (the untracked ones, id < 0, left out).

    Args:
        img: HxWx3 uint8 BGR. boxes: float [N, 4] xyxy. track_ids: int [N] (-1: not tracked).
        labels: int [N] class ids. scores: float [N]. class_names: names by class id.

    Returns:
        HxWx3 uint8 BGR.
    """
    ids = np.asarray(track_ids, dtype=np.int64).reshape(-1)
    keep = np.flatnonzero(ids >= 0)
    names = [str(n) for n in class_names]
    captions = [f"#{ids[k]} {names[int(labels[k])] if 0 <= int(labels[k]) < len(names) else int(labels[k])}"
                for k in keep]
    return draw_boxes(img, np.asarray(boxes, np.float64).reshape(-1, 4)[keep], np.arange(len(keep)),
                      np.asarray(scores, np.float64).reshape(-1)[keep], captions, id_colours(ids[keep]))
