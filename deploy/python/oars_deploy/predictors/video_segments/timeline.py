"""A picture of temporal action localisation: frames along time, ground-truth and predicted segments as bars.

Shared by ``tools/eval.py --show-dir`` / ``--report`` (training side) and the deployed segments predictor, so the
two draw a video's segments the same way (NumPy and OpenCV only).

Layout, top to bottom: an optional title, a strip of frames placed at their times, the ground-truth row, the
predicted row, and a time axis. Each row is split into lanes; a segment goes to the first lane where neither its
bar nor its caption touches what is already there (captions may stick out past short bars), so captions never
overlap. Segments that fit in no lane (``max_lanes``) are counted in the row's title instead of drawn.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import cv2
import numpy as np

from oars_deploy.draw.boxes import _text_colour
from oars_deploy.draw.palette import get_palette

_FONT = cv2.FONT_HERSHEY_SIMPLEX
_BACKGROUND, _AXIS, _TEXT = (250, 250, 250), (90, 90, 90), (20, 20, 20)
_UNLABELLED, _UNKNOWN = np.array([200, 140, 60]), np.array([150, 150, 150])  # BGR: proposals blue, unknown grey
_LEFT, _RIGHT, _LANE_H, _PAD = 130, 24, 24, 4
_MIN_WIDTH = 1200


def assign_lanes(spans: Sequence[tuple[float, float]], max_lanes: int, gap: float = 4.0) -> list[int]:
    """Greedy lane assignment of horizontal pixel spans, in the given order (put the important ones first).

    Args:
        spans: (left, right) pixel extents of each item, bar and caption together.
        max_lanes: lanes available.
        gap: pixels kept free between two items of one lane.

    Returns:
        one lane index per span, or -1 for spans that fit in no lane.
    """
    lanes: list[list[tuple[float, float]]] = []
    out = []
    for left, right in spans:
        for k, used in enumerate(lanes):
            if all(right + gap <= a or left >= b + gap for a, b in used):
                used.append((left, right))
                out.append(k)
                break
        else:
            if len(lanes) < max_lanes:
                lanes.append([(left, right)])
                out.append(len(lanes) - 1)
            else:
                out.append(-1)
    return out


def _tick_step(duration: float, width: int) -> float:
    """A 1-2-5 step giving ticks at least ~90 px apart."""
    raw = duration / max(1.0, width / 90.0)
    base = 10.0 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    for m in (1.0, 2.0, 5.0, 10.0):
        if m * base >= raw:
            return m * base
    return 10.0 * base


def _time_text(t: float, step: float) -> str:
    if t >= 60.0 and step >= 1.0:
        return f'{int(t // 60)}:{int(round(t % 60)):02d}'
    return f'{t:.{max(0, -math.floor(math.log10(step)))}f} s' if step < 1 else f'{t:.0f} s'


def _check_segments(segments: Sequence, width: int, what: str) -> list[tuple]:
    out = []
    for k, seg in enumerate(segments):
        if not isinstance(seg, Sequence) or len(seg) != width:
            raise ValueError(f'draw_timeline: {what}[{k}] must be a tuple of {width} values '
                             f'({"start_s, end_s, label, score" if width == 4 else "start_s, end_s, label"}), '
                             f'got {seg!r}')
        start, end = float(seg[0]), float(seg[1])
        if not (math.isfinite(start) and math.isfinite(end)) or end < start:
            raise ValueError(f'draw_timeline: {what}[{k}] has start {start} and end {end}: need finite start <= end')
        out.append(tuple(seg))
    return out


def _label(label: object, names: list[str], what: str) -> tuple[str, int]:
    """(caption name, colour index; -1 for a name outside the classes, -2 for no label)."""
    if label is None:
        return '', -2
    if isinstance(label, str):
        return label, names.index(label) if label in names else -1
    if isinstance(label, bool) or not isinstance(label, int | np.integer):
        raise ValueError(f'draw_timeline: {what} label must be a class index, a name or None, got {label!r}')
    if not 0 <= int(label) < len(names):
        raise ValueError(f'draw_timeline: {what} label {int(label)} is outside [0, {len(names)}) for '
                         f'{len(names)} class names')
    return names[int(label)], int(label)


def _frames_strip(frames: Sequence[np.ndarray], x0: int, span: int, height: int, canvas_w: int) -> np.ndarray:
    """Frames evenly spaced over the video (frame k centred at (k + 0.5) / N of it), on a [height, W, 3] band."""
    band = np.full((height, canvas_w, 3), _BACKGROUND, np.uint8)
    n = len(frames)
    cell = span / n
    for k, img in enumerate(frames):
        img = np.asarray(img)
        if img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] != 3 or min(img.shape[:2]) < 1:
            raise ValueError(f'draw_timeline: frames[{k}] must be an (H, W, 3) uint8 BGR image, got shape '
                             f'{tuple(img.shape)} dtype {img.dtype}')
        h, w = img.shape[:2]
        new_h = height - 2
        new_w = max(1, min(int(cell) - 2, int(round(new_h * w / h))))
        new_h = max(1, min(new_h, int(round(new_w * h / w))))
        small = cv2.resize(img, (new_w, new_h), interpolation=cv2.INTER_AREA if new_h < h else cv2.INTER_LINEAR)
        cx = x0 + (k + 0.5) * cell
        left = int(round(cx - new_w / 2))
        top = (height - new_h) // 2
        band[top: top + new_h, left: left + new_w] = small
    return band


def _row(items: list[tuple[float, float, str, int]], title: str, duration: float, x0: int, span: int,
         canvas_w: int, bgr: np.ndarray, max_lanes: int, scale: float) -> np.ndarray:
    """One labelled row of bars, items in priority order (start_s, end_s, caption, colour index)."""
    def px(t: float) -> float:
        return x0 + span * min(max(t, 0.0), duration) / duration

    extents = []
    for start, end, caption, _ in items:
        left, right = px(start), max(px(end), px(start) + 2)
        tw = cv2.getTextSize(caption, _FONT, scale, 1)[0][0] + 2 * _PAD if caption else 0
        extents.append((left, right if tw <= right - left else left + tw))
    lanes = assign_lanes(extents, max_lanes)
    shown = max(lanes, default=-1) + 1
    band = np.full((_PAD + max(shown, 1) * (_LANE_H + _PAD), canvas_w, 3), _BACKGROUND, np.uint8)
    cv2.line(band, (x0, band.shape[0] - 1), (x0 + span, band.shape[0] - 1), (210, 210, 210), 1)
    hidden = sum(1 for lane in lanes if lane < 0)
    (_, th), _ = cv2.getTextSize('Ag', _FONT, scale, 1)
    cv2.putText(band, title, (6, _PAD + (_LANE_H + th) // 2), _FONT, scale, _TEXT, 1, cv2.LINE_AA)
    if hidden:
        cv2.putText(band, f'(+{hidden} more)', (6, _PAD + _LANE_H + (_LANE_H + th) // 2), _FONT, scale * 0.85,
                    _AXIS, 1, cv2.LINE_AA)
    if not items:
        cv2.putText(band, 'none', (x0 + 4, _PAD + (_LANE_H + th) // 2), _FONT, scale, _AXIS, 1, cv2.LINE_AA)
    # lowest priority first, so the most important bar is drawn last (on top at shared edges)
    for (start, end, caption, cls), lane, (_, right_ext) in reversed(list(zip(items, lanes, extents))):
        if lane < 0:
            continue
        top = _PAD + lane * (_LANE_H + _PAD)
        x1, x2 = int(round(px(start))), int(round(max(px(end), px(start) + 2)))
        colour = bgr[cls] if cls >= 0 else _UNLABELLED if cls == -2 else _UNKNOWN
        cv2.rectangle(band, (x1, top), (x2, top + _LANE_H - 1), tuple(int(c) for c in colour), cv2.FILLED)
        if not caption:
            continue
        inside = right_ext <= x2 + 0.5
        ink = _text_colour(colour) if inside else _TEXT
        cv2.putText(band, caption, (x1 + _PAD, top + (_LANE_H + th) // 2), _FONT, scale, ink, 1, cv2.LINE_AA)
    return band


def draw_timeline(duration_s: float, predicted: Sequence[tuple[float, float, object, float]],
                  ground_truth: Sequence[tuple[float, float, object]] | None,
                  frames: Sequence[np.ndarray] | None, class_names: Sequence[str], *, width: int = 1280,
                  title: str = '', max_lanes: int = 6, frame_height: int = 72,
                  palette: Sequence[Sequence[int]] | np.ndarray | None = None) -> np.ndarray:
    """Draw one video's segments along its time axis.

    Args:
        duration_s: the video's length in seconds (> 0); the axis spans [0, duration_s], segments are clipped to it.
        predicted: ``(start_s, end_s, label, score)`` per segment, label a class index into ``class_names``, a
            name, or None (class-agnostic proposals: no name in the caption); captions read ``"name 0.87"``. Given
            in priority order is not needed: they are ranked by score, the best placed first.
        ground_truth: ``(start_s, end_s, label)`` per segment, or None when the video has no annotation (the row
            is left out; an empty list draws a row saying ``none``).
        frames: HxWx3 uint8 BGR images evenly spaced over the video (frame k belongs at ``(k + 0.5) / N`` of it),
            drawn as a strip above the rows; None or empty draws no strip.
        class_names: names of the class indices; bar colours come from ``palette`` (RGB rows, one per class;
            default the deterministic palette without its black first colour). Names outside the list are grey,
            unlabelled segments blue.
        width: picture width in pixels (at least 1200, so captions stay legible).
        title: text above everything (e.g. the video name and its recall).
        max_lanes: lanes per row; segments that fit in none are counted, not drawn.
        frame_height: height of the frame strip in pixels.

    Returns:
        uint8 BGR image [H, width, 3]; H grows with the lanes used.

    Raises:
        ValueError: a non-positive or non-finite duration, a malformed segment or frame, an unknown class index,
            ``width < 1200``.
    """
    duration = float(duration_s)
    if not math.isfinite(duration) or duration <= 0:
        raise ValueError(f'draw_timeline: duration_s must be a positive number of seconds, got {duration_s!r}')
    if isinstance(width, bool) or not isinstance(width, int) or width < _MIN_WIDTH:
        raise ValueError(f'draw_timeline: width must be an int >= {_MIN_WIDTH} (legible captions), got {width!r}')
    if max_lanes < 1 or frame_height < 8:
        raise ValueError(f'draw_timeline: max_lanes must be >= 1 and frame_height >= 8, got {max_lanes}, '
                         f'{frame_height}')
    names = [str(n) for n in class_names]
    if palette is None:
        rgb = get_palette(len(names) + 1)[1:] if names else np.zeros((0, 3), np.uint8)
    else:
        rgb = get_palette(len(names), palette)
    bgr = rgb[:, ::-1].astype(np.int64)
    scale = 0.5
    x0, span = _LEFT, width - _LEFT - _RIGHT

    preds = _check_segments(predicted, 4, 'predicted')
    order = sorted(range(len(preds)), key=lambda i: -float(preds[i][3]))
    pred_items = []
    for i in order:
        name, cls = _label(preds[i][2], names, f'predicted[{i}]')
        score = float(preds[i][3])
        caption = f"{name} {score:.2f}".strip() if score >= 0.01 or score == 0 else f"{name} {score:.0e}".strip()
        pred_items.append((float(preds[i][0]), float(preds[i][1]), caption, cls))

    bands = []
    if title:
        (_, th), base = cv2.getTextSize(title, _FONT, 0.6, 1)
        head = np.full((th + base + 12, width, 3), _BACKGROUND, np.uint8)
        cv2.putText(head, title, (6, th + 6), _FONT, 0.6, _TEXT, 1, cv2.LINE_AA)
        bands.append(head)
    if frames is not None and len(frames):
        bands.append(_frames_strip(list(frames), x0, span, int(frame_height), width))
    if ground_truth is not None:
        gts = _check_segments(ground_truth, 3, 'ground_truth')
        gt_items = []
        for i in sorted(range(len(gts)), key=lambda i: float(gts[i][0])):
            name, cls = _label(gts[i][2], names, f'ground_truth[{i}]')
            gt_items.append((float(gts[i][0]), float(gts[i][1]), name, cls))
        bands.append(_row(gt_items, 'ground truth', duration, x0, span, width, bgr, max_lanes, scale))
    bands.append(_row(pred_items, 'predicted', duration, x0, span, width, bgr, max_lanes, scale))
    bands.append(_axis(duration, x0, span, width, scale))
    return np.ascontiguousarray(np.concatenate(bands, axis=0))


def _axis(duration: float, x0: int, span: int, width: int, scale: float) -> np.ndarray:
    """The time axis: a line with 1-2-5 ticks and their times."""
    (_, th), base = cv2.getTextSize('0', _FONT, scale, 1)
    band = np.full((th + base + 16, width, 3), _BACKGROUND, np.uint8)
    cv2.line(band, (x0, 2), (x0 + span, 2), _AXIS, 1)
    step = _tick_step(duration, span)
    for k in range(int(math.floor(duration / step + 1e-9)) + 1):
        t = k * step
        x = int(round(x0 + span * t / duration))
        cv2.line(band, (x, 2), (x, 8), _AXIS, 1)
        text = _time_text(t, step)
        tw = cv2.getTextSize(text, _FONT, scale, 1)[0][0]
        left = min(max(x - tw // 2, 0), width - tw - 1)
        cv2.putText(band, text, (left, 10 + th), _FONT, scale, _AXIS, 1, cv2.LINE_AA)
    cv2.putText(band, 'time', (6, 10 + th), _FONT, scale, _AXIS, 1, cv2.LINE_AA)
    return band
