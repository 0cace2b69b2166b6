"""draw_timeline: size, where bars land, lanes keep captions apart, frames strip, bad input."""

import numpy as np
import pytest

from oars_deploy.draw.palette import get_palette
from oars_deploy.predictors.video_segments.timeline import assign_lanes, draw_timeline

NAMES = ['left', 'right', 'grow']


def _colour_columns(img: np.ndarray, bgr) -> np.ndarray:
    """x positions where some pixel has exactly this colour."""
    hit = (img == np.asarray(bgr, np.uint8)).all(axis=2)
    return np.flatnonzero(hit.any(axis=0))


def test_bars_land_at_their_times_and_picture_is_wide():
    pal = get_palette(len(NAMES) + 1)[1:, ::-1]  # BGR, the default palette without black
    img = draw_timeline(40.0, [(10.0, 20.0, 1, 0.9)], [(0.0, 8.0, 0), (30.0, 40.0, 2)], None, NAMES)
    assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[1] == 1280 and img.shape[0] >= 80
    span = 1280 - 130 - 24
    x = _colour_columns(img, pal[1])  # the predicted 'right' bar
    assert abs(x.min() - (130 + span * 0.25)) <= 1 and abs(x.max() - (130 + span * 0.5)) <= 1
    x = _colour_columns(img, pal[2])  # gt 'grow' to the end
    assert abs(x.max() - (130 + span)) <= 1
    assert _colour_columns(img, pal[0]).max() < 130 + span * 0.2 + 2


def test_lanes_never_overlap_and_overflow_is_reported():
    spans = [(0, 100), (50, 150), (120, 200), (0, 300), (10, 20)]
    lanes = assign_lanes(spans, max_lanes=2)
    assert lanes == [0, 1, 0, -1, 1] or lanes[3] == -1
    for k in range(2):
        mine = sorted(s for s, lane in zip(spans, lanes) if lane == k)
        assert all(a[1] + 4 <= b[0] for a, b in zip(mine, mine[1:]))
    # many overlapping predictions: more lanes, never more than max_lanes
    preds = [(5.0 + 0.1 * i, 6.0 + 0.1 * i, 0, 1.0 - 0.01 * i) for i in range(20)]
    one = draw_timeline(30.0, preds[:1], None, None, NAMES)
    many = draw_timeline(30.0, preds, None, None, NAMES, max_lanes=3)
    assert many.shape[0] > one.shape[0]
    assert many.shape[0] == draw_timeline(30.0, preds, None, None, NAMES, max_lanes=3).shape[0]


def test_frames_strip_and_agnostic_labels():
    frames = [np.full((48, 64, 3), v, np.uint8) for v in (10, 200, 77)]
    with_frames = draw_timeline(12.0, [(1.0, 2.0, None, 0.5)], [], frames, ['action'], width=1400, title='vid 1')
    without = draw_timeline(12.0, [(1.0, 2.0, None, 0.5)], [], None, ['action'], width=1400, title='vid 1')
    assert with_frames.shape[1] == 1400 and with_frames.shape[0] > without.shape[0]
    strip = with_frames[: with_frames.shape[0] - without.shape[0] + 40]
    for v in (10, 200, 77):
        assert ((strip == v).all(axis=2)).sum() > 500  # each frame drawn big enough to see


def test_bad_input_is_named():
    with pytest.raises(ValueError, match='duration_s must be a positive'):
        draw_timeline(0.0, [], None, None, NAMES)
    with pytest.raises(ValueError, match=r'predicted\[0\] must be a tuple of 4'):
        draw_timeline(5.0, [(1.0, 2.0)], None, None, NAMES)
    with pytest.raises(ValueError, match=r'label 5 is outside \[0, 3\)'):
        draw_timeline(5.0, [(1.0, 2.0, 5, 0.3)], None, None, NAMES)
    with pytest.raises(ValueError, match='width must be an int >= 1200'):
        draw_timeline(5.0, [], None, None, NAMES, width=600)
    with pytest.raises(ValueError, match=r'ground_truth\[0\] has start 3.0 and end 1.0'):
        draw_timeline(5.0, [], [(3.0, 1.0, 0)], None, NAMES)
    with pytest.raises(ValueError, match=r'frames\[0\] must be an \(H, W, 3\) uint8'):
        draw_timeline(5.0, [], None, [np.zeros((4, 4), np.float32)], NAMES)
