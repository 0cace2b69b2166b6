"""Draw labelled boxes on BGR images with OpenCV (deterministic: same input, same pixels)."""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from oars_deploy.draw.palette import get_palette


def drawing_order(scores: np.ndarray | None, count: int, score_thr: float, who: str,
                  what: str) -> tuple[np.ndarray | None, np.ndarray]:
    """Which of ``count`` drawn objects (boxes, masks) are drawn, and in which order: those scoring at least
    ``score_thr``, weakest first, so the strongest is drawn last (on top); all, in input order, without scores.

    Args:
        scores: float [count] or None. count: the number of objects. score_thr: the smallest score drawn.
        who: the drawing function, what: the objects' word, for the message.

    Returns:
        (scores as float64 [count] or None, int64 [K] indices in drawing order).

    Raises:
        ValueError: ``scores`` does not hold one score per object.
    """
    if scores is None:
        return None, np.arange(count)
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    if len(scores) != count:
        raise ValueError(f'{who}: {count} {what} but {len(scores)} scores')
    keep = np.flatnonzero(scores >= score_thr)
    return scores, keep[np.argsort(scores[keep], kind='stable')]


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
    above the box when there is room, else inside it, or below it where that would cover another box's
    caption (the strongest boxes choose first). Line width and font grow with the image; the
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
    scores, keep = drawing_order(scores, len(boxes), score_thr, 'draw_boxes', 'boxes')

    h, w = out.shape[:2]
    thick = max(1, int(round(max(h, w) / 400)))
    font, font_scale = cv2.FONT_HERSHEY_SIMPLEX, float(np.clip(max(h, w) / 800, 0.35, 1.0))
    font_thick = max(1, int(round(font_scale * 1.5)))
    limit = 4 * max(h, w)  # keeps wild coordinates inside OpenCV's int range
    corners = {int(i): tuple(int(round(v)) for v in np.clip(np.nan_to_num(boxes[i]), -limit, limit)) for i in keep}
    captions, placed = {}, []
    for i in keep[::-1]:  # the strongest box chooses its caption's place first
        text = names[labels[i]] if scores is None else f'{names[labels[i]]} {scores[i]:.2f}'
        (tw, th), base = cv2.getTextSize(text, font, font_scale, font_thick)
        rect = _caption_rect(corners[int(i)], tw + 2, th + base + 2, w, h, placed)
        placed.append(rect)
        captions[int(i)] = (text, rect, th)
    for i in keep:  # every box first, then the captions over them, so no box line crosses a caption
        cv2.rectangle(out, corners[int(i)][:2], corners[int(i)][2:], tuple(int(c) for c in bgr[labels[i]]), thick,
                      cv2.LINE_8)
    for i in keep:  # from the lowest score up: where captions must overlap, the strongest stays on top
        text, (left, top, right, bottom), th = captions[int(i)]
        cv2.rectangle(out, (left, top), (right, bottom), tuple(int(c) for c in bgr[labels[i]]), cv2.FILLED)
        cv2.putText(out, text, (left + 1, top + th + 1), font, font_scale, _text_colour(bgr[labels[i]]),
                    font_thick, cv2.LINE_AA)
    return out


def _caption_rect(box: tuple[int, int, int, int], width: int, height: int, img_w: int, img_h: int,
                  placed: list[tuple[int, int, int, int]]) -> tuple[int, int, int, int]:
    """Where a caption of ``width`` x ``height`` pixels goes for the xyxy ``box``: above it, inside its top edge,
    below it or inside its bottom edge, the first of these that lies in the image and overlaps no caption in
    ``placed`` (so neighbouring objects' labels stay readable); the first that lies in the image when all
    overlap. Returns (left, top, right, bottom), inclusive."""
    x1, y1, _, y2 = box
    left = min(max(x1, 0), max(img_w - width, 0))
    tops = [y1 - height, max(y1, 0), y2 + 1, y2 - height]
    inside = [t for t in tops if 0 <= t and t + height <= img_h - 1] or [max(min(y1, img_h - 1 - height), 0)]
    for top in inside:
        rect = (left, top, left + width, top + height)
        if not any(rect[0] <= p[2] and p[0] <= rect[2] and rect[1] <= p[3] and p[1] <= rect[3] for p in placed):
            return rect
    return (left, inside[0], left + width, inside[0] + height)
