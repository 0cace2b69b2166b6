"""Draw labelled boxes on BGR images with OpenCV (deterministic: same input, same pixels)."""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from oars_deploy.draw.palette import get_palette


def _text_colour(bgr: np.ndarray) -> tuple[int, int, int]:
    """Black on light label boxes, white on dark ones (ITU-R 601 luma)."""
    b, g, r = (float(v) for v in bgr)
    return (0, 0, 0) if 0.299 * r + 0.587 * g + 0.114 * b > 140 else (255, 255, 255)


def draw_boxes(img: np.ndarray, bboxes: np.ndarray, labels: np.ndarray, scores: np.ndarray | None,
               class_names: Sequence[str], palette: np.ndarray | Sequence[Sequence[int]] | None = None,
               score_thr: float = 0.0) -> np.ndarray:
    """Return a copy of ``img`` (H x W x 3 BGR uint8) with xyxy ``bboxes`` drawn in their class colour.

    ``palette`` holds one RGB row per class (``get_palette``'s default when None). Each box gets a
    caption ``"name 0.87"`` (just the name when ``scores`` is None) on a filled box of its colour,
    above the box when there is room, else inside it. Line width and font grow with the image; the
    font never drops below a readable size on small images. Boxes with score < ``score_thr`` are
    skipped; the rest are drawn from the lowest score up, so the strongest stay on top.
    """
    img = np.asarray(img)
    if img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] != 3:
        raise ValueError(f'draw_boxes: img must be an (H, W, 3) uint8 BGR image, got shape {tuple(img.shape)} '
                         f'dtype {img.dtype}')
    boxes = np.asarray(bboxes, dtype=np.float64).reshape(-1, 4)
    labels = np.asarray(labels).reshape(-1).astype(np.int64)
    if len(labels) != len(boxes):
        raise ValueError(f'draw_boxes: {len(boxes)} boxes but {len(labels)} labels')
    names = [str(n) for n in class_names]
    if len(labels) and (labels.min() < 0 or labels.max() >= len(names)):
        raise ValueError(f'draw_boxes: labels {np.unique(labels).tolist()} outside [0, {len(names)}) '
                         f'for {len(names)} class names')
    out = img.copy()
    if len(boxes) == 0:
        return out
    bgr = get_palette(len(names), palette)[:, ::-1].astype(np.int64)
    if scores is not None:
        scores = np.asarray(scores, dtype=np.float64).reshape(-1)
        if len(scores) != len(boxes):
            raise ValueError(f'draw_boxes: {len(boxes)} boxes but {len(scores)} scores')
        keep = np.flatnonzero(scores >= score_thr)
        keep = keep[np.argsort(scores[keep], kind='stable')]
    else:
        keep = np.arange(len(boxes))

    h, w = out.shape[:2]
    thick = max(1, int(round(max(h, w) / 400)))
    font, font_scale = cv2.FONT_HERSHEY_SIMPLEX, float(np.clip(max(h, w) / 1000, 0.35, 1.0))
    font_thick = max(1, int(round(font_scale * 1.5)))
    limit = 4 * max(h, w)  # keeps wild coordinates inside OpenCV's int range
    for i in keep:
        x1, y1, x2, y2 = (int(round(v)) for v in np.clip(np.nan_to_num(boxes[i]), -limit, limit))
        colour = tuple(int(c) for c in bgr[labels[i]])
        cv2.rectangle(out, (x1, y1), (x2, y2), colour, thick, cv2.LINE_8)
        caption = names[labels[i]] if scores is None else f'{names[labels[i]]} {scores[i]:.2f}'
        (tw, th), base = cv2.getTextSize(caption, font, font_scale, font_thick)
        bh = th + base + 2
        top = y1 - bh if y1 - bh >= 0 else max(y1, 0)  # above the box, else inside its top edge
        left = min(max(x1, 0), max(w - tw - 2, 0))
        cv2.rectangle(out, (left, top), (left + tw + 2, top + bh), colour, cv2.FILLED)
        cv2.putText(out, caption, (left + 1, top + th + 1), font, font_scale, _text_colour(bgr[labels[i]]),
                    font_thick, cv2.LINE_AA)
    return out
