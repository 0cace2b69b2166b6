"""Draw labelled boxes on BGR images with OpenCV (deterministic: same input, same pixels)."""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from oars_deploy.draw.palette import get_palette
from oars_deploy.words import plural


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
    caption ``"name 0.87"`` (just the name when ``scores`` is None) on a filled box of its colour, placed by
    :func:`place_captions` so that no two captions overlap and all lie inside the image: next to its box (above
    when there is room, else inside it or below it, left- or right-aligned), else at the nearest free place with
    a leader line to its box, else left out (crowded images); the strongest boxes choose first. Line width and
    font grow with the image; the font never drops below a readable size on small images. Boxes with score <
    ``score_thr`` are skipped; the rest are drawn from the lowest score up, so the strongest stay on top.
    """
    img = np.asarray(img)
    if img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] != 3:
        raise ValueError(f'draw_boxes: img must be an (H, W, 3) uint8 BGR image, got shape {tuple(img.shape)} '
                         f'dtype {img.dtype}')
    boxes = np.asarray(bboxes, dtype=np.float64).reshape(-1, 4)
    labels = np.asarray(labels).reshape(-1).astype(np.int64)
    if len(labels) != len(boxes):
        raise ValueError(f"draw_boxes: {plural(len(boxes), 'box')} but {plural(len(labels), 'label')}")
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
    order = keep[::-1]  # the strongest box chooses its caption's place first
    texts, sizes, rises = [], [], []
    for i in order:
        text = names[labels[i]] if scores is None else f'{names[labels[i]]} {scores[i]:.2f}'
        (tw, th), base = cv2.getTextSize(text, font, font_scale, font_thick)
        texts.append(text)
        sizes.append((tw + 2, th + base + 2))
        rises.append(th)
    rects = place_captions(np.array([corners[int(i)] for i in order], np.int64).reshape(-1, 4),
                           np.array(sizes, np.int64).reshape(-1, 2), (h, w))
    captions = {int(i): (texts[k], tuple(int(v) for v in rects[k]), rises[k]) for k, i in enumerate(order)}
    for i in keep:  # every box first, then the captions over them, so no box line crosses a caption
        cv2.rectangle(out, corners[int(i)][:2], corners[int(i)][2:], tuple(int(c) for c in bgr[labels[i]]), thick,
                      cv2.LINE_8)
    for i in keep:  # captions never overlap (place_captions); one with no free place is left out
        text, (left, top, right, bottom), th = captions[int(i)]
        if left < 0:
            continue
        colour = tuple(int(c) for c in bgr[labels[i]])
        x1, y1, x2, y2 = corners[int(i)]
        if bottom < y1 - thick - 1 or top > y2 + thick + 1 or right < x1 or left > x2:  # moved away: a leader line
            cv2.line(out, (int(np.clip((left + right) // 2, x1, x2)), y1 if bottom < y1 else y2),
                     ((left + right) // 2, bottom if bottom < y1 else top), colour, 1, cv2.LINE_AA)
        cv2.rectangle(out, (left, top), (right, bottom), colour, cv2.FILLED)
        cv2.putText(out, text, (left + 1, top + th + 1), font, font_scale, _text_colour(bgr[labels[i]]),
                    font_thick, cv2.LINE_AA)
    return out


def rects_intersect(rects: np.ndarray, placed: np.ndarray) -> np.ndarray:
    """Which of ``rects`` ([M, 4] inclusive left, top, right, bottom) intersect any of ``placed`` ([K, 4]).

    Vectorised (an [M, K] comparison) so that trying every candidate place of a caption against every caption
    already placed stays cheap on crowded images.

    Returns:
        bool [M].
    """
    rects = np.asarray(rects, np.int64).reshape(-1, 4)
    placed = np.asarray(placed, np.int64).reshape(-1, 4)
    if not len(placed) or not len(rects):
        return np.zeros(len(rects), bool)
    r, p = rects[:, None, :], placed[None, :, :]
    hit = (r[..., 0] <= p[..., 2]) & (p[..., 0] <= r[..., 2]) & (r[..., 1] <= p[..., 3]) & (p[..., 1] <= r[..., 3])
    return hit.any(1)


def place_captions(boxes: np.ndarray, sizes: np.ndarray, image_shape: tuple[int, ...]) -> np.ndarray:
    """Where each box's caption goes, so that no two captions intersect and every caption lies inside the image.

    Greedy, in the given order (pass the boxes strongest first: they get the best places). Each caption first
    tries the places next to its box (:func:`_caption_rect`: above, inside the top edge, below, inside the bottom
    edge; left-aligned, then right-aligned); when all of those are taken, the free place nearest to the box on a
    grid over the image (the drawer then joins it to its box with a leader line); when the image has no free
    place of that size left, or the caption is larger than the image, the caption is left out (row ``-1``) and
    the box is drawn without it, never over another caption.

    Args:
        boxes: int [N, 4] xyxy boxes in image pixels (any values: boxes may reach outside the image).
        sizes: int [N, 2] caption (width, height) in pixels.
        image_shape: (H, W, ...) of the image.

    Returns:
        int64 [N, 4] inclusive (left, top, right, bottom) per caption, or ``[-1, -1, -1, -1]`` where it is left
        out.
    """
    boxes = np.asarray(boxes, np.int64).reshape(-1, 4)
    sizes = np.asarray(sizes, np.int64).reshape(-1, 2)
    if len(sizes) != len(boxes):
        raise ValueError(f"place_captions: {plural(len(boxes), 'box')} but {plural(len(sizes), 'caption size')}")
    img_h, img_w = int(image_shape[0]), int(image_shape[1])
    out = np.full((len(boxes), 4), -1, np.int64)
    placed = np.zeros((0, 4), np.int64)
    cell = max(1, round(max(img_h, img_w) / 320))  # the occupancy grid's cell, in pixels
    taken = np.zeros((-(-img_h // cell), -(-img_w // cell)), bool)  # cells any placed caption touches
    full: list[tuple[int, int]] = []  # sizes with no free place left: a caption at least as large has none either
    for k, (box, (width, height)) in enumerate(zip(boxes, sizes)):
        width, height = int(width), int(height)
        if width > img_w - 1 or height > img_h - 1:
            continue
        near = _caption_rect(tuple(int(v) for v in box), width, height, img_w, img_h, placed)
        if not rects_intersect(np.array([near]), placed)[0]:
            rect = near
        elif any(width >= w and height >= h for w, h in full):
            rect = None
        else:
            rect = _nearest_free(box, width, height, img_w, img_h, taken, cell)
        if rect is None:
            full.append((width, height))
            continue
        out[k] = rect
        placed = np.vstack([placed, np.asarray(rect, np.int64)[None]])
        taken[rect[1] // cell:rect[3] // cell + 1, rect[0] // cell:rect[2] // cell + 1] = True
    return out


def _nearest_free(box: np.ndarray, width: int, height: int, img_w: int, img_h: int, taken: np.ndarray,
                  cell: int) -> tuple[int, int, int, int] | None:
    """The free place for a ``width`` x ``height`` caption nearest to ``box``'s top-left corner, its corner on a grid
    of quarter-width, half-height steps; free means it touches no ``cell``-pixel cell of ``taken`` (every candidate
    tested at once through a summed-area table, so a crowded image costs a few milliseconds per caption).
    Conservative: a place is refused when it only shares a cell with a caption, never accepted over one. None when
    none is free."""
    table = np.zeros((taken.shape[0] + 1, taken.shape[1] + 1), np.int32)
    table[1:, 1:] = taken.cumsum(0, dtype=np.int32).cumsum(1, dtype=np.int32)
    lefts = np.arange(0, img_w - width, max(1, width // 4))  # a quarter caption apart across, half along
    tops = np.arange(0, img_h - height, max(1, height // 2))
    grid_t, grid_l = (g.reshape(-1) for g in np.meshgrid(tops, lefts, indexing='ij'))
    c0, c1 = grid_l // cell, (grid_l + width) // cell + 1  # cells covered: [c0, c1) x [r0, r1)
    r0, r1 = grid_t // cell, (grid_t + height) // cell + 1
    used = table[r1, c1] - table[r0, c1] - table[r1, c0] + table[r0, c0]
    free = np.flatnonzero(used == 0)
    if not len(free):
        return None
    cx, cy = float(np.clip(box[0], 0, img_w - 1)), float(np.clip(box[1], 0, img_h - 1))
    best = free[np.argmin(np.hypot(grid_l[free] - cx, grid_t[free] + height - cy))]
    left, top = int(grid_l[best]), int(grid_t[best])
    return left, top, left + width, top + height


def _caption_rect(box: tuple[int, int, int, int], width: int, height: int, img_w: int, img_h: int,
                  placed: np.ndarray | list[tuple[int, int, int, int]]) -> tuple[int, int, int, int]:
    """Where a caption of ``width`` x ``height`` pixels goes next to the xyxy ``box``: above it, inside its top
    edge, below it or inside its bottom edge, aligned with its left edge, then the same aligned with its right
    edge; the first of these that lies in the image and overlaps no caption in ``placed`` (so neighbouring objects'
    labels stay readable); the first that lies in the image when all overlap (:func:`place_captions` then looks
    further away). Returns (left, top, right, bottom), inclusive."""
    x1, y1, x2, y2 = box
    left = min(max(x1, 0), max(img_w - 1 - width, 0))
    right_aligned = min(max(x2 - width, 0), max(img_w - 1 - width, 0))
    tops = [y1 - height, max(y1, 0), y2 + 1, y2 - height]
    inside = [t for t in tops if 0 <= t and t + height <= img_h - 1] or [max(min(y1, img_h - 1 - height), 0)]
    cands = np.array([(x, t, x + width, t + height) for x in dict.fromkeys((left, right_aligned)) for t in inside],
                     np.int64)
    free = ~rects_intersect(cands, np.asarray(placed, np.int64).reshape(-1, 4))
    return tuple(int(v) for v in cands[int(np.argmax(free)) if free.any() else 0])
