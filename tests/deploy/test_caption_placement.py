"""Caption placement on crowded pictures: no two captions intersect, all lie inside the image, the strongest box
keeps the place next to it, and the drawer uses exactly the places place_captions computes."""

import numpy as np
import pytest

from oars_deploy.draw import draw_boxes
from oars_deploy.draw.boxes import place_captions, rects_intersect

NAMES = ['circle', 'square', 'triangle']
PALETTE = np.array([[255, 0, 0], [0, 255, 0], [0, 0, 255]], dtype=np.uint8)  # RGB


def _crowd(n: int, side: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    xy = rng.integers(0, side * 3 // 4, size=(n, 2))
    wh = rng.integers(side // 8, side // 3, size=(n, 2))
    return np.concatenate([xy, np.minimum(xy + wh, side - 1)], 1)


def _pairwise_overlaps(rects: np.ndarray) -> list[tuple[int, int]]:
    return [(i, j) for i in range(len(rects)) for j in range(i + 1, len(rects))
            if rects_intersect(rects[i:i + 1], rects[j:j + 1])[0]]


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_forty_overlapping_boxes_in_256_px_get_captions_that_never_meet(seed):
    boxes = _crowd(40, 256, seed)
    sizes = np.tile([62, 14], (40, 1))  # "triangle 0.87" at the smallest font
    rects = place_captions(boxes, sizes, (256, 256, 3))
    drawn = rects[rects[:, 0] >= 0]
    assert _pairwise_overlaps(drawn) == []
    assert (drawn[:, :2] >= 0).all() and (drawn[:, 2] <= 255).all() and (drawn[:, 3] <= 255).all()
    assert ((drawn[:, 2] - drawn[:, 0]) == 62).all() and ((drawn[:, 3] - drawn[:, 1]) == 14).all()  # not squeezed
    assert len(drawn) >= 24  # crowded, not empty: most captions find a place (at most 68 fit at all)
    assert rects[0].tolist() == [boxes[0, 0], boxes[0, 1] - 14, boxes[0, 0] + 62, boxes[0, 1]] or boxes[0, 1] < 14


def test_the_old_greedy_test_would_fail_here():
    """The bad case: all boxes share one top-left corner, so every place next to a box is taken after the first
    few; the captions move away (or are left out) instead of stacking on each other."""
    boxes = np.tile([100, 100, 180, 180], (12, 1))
    rects = place_captions(boxes, np.tile([50, 12], (12, 1)), (256, 256))
    assert (rects[:, 0] >= 0).all()  # the image has room for all of them
    assert _pairwise_overlaps(rects) == []
    assert len({tuple(r) for r in rects}) == 12


def test_a_full_image_leaves_captions_out_and_a_too_big_caption_is_dropped():
    rects = place_captions(np.tile([0, 0, 30, 30], (10, 1)), np.tile([30, 14], (10, 1)), (32, 32))
    assert (rects[:2, 0] >= 0).all() and (rects[2:] == -1).all()  # two fit in 32 x 32, the rest are left out
    assert _pairwise_overlaps(rects[:2]) == []
    assert (place_captions(np.array([[0, 0, 5, 5]]), np.array([[40, 10]]), (32, 32)) == -1).all()
    with pytest.raises(ValueError, match='2 boxes but 1 caption size'):
        place_captions(np.zeros((2, 4)), np.zeros((1, 2)), (32, 32))


def test_the_drawer_paints_the_places_it_was_given(monkeypatch):
    """40 boxes with scores drawn on 256 px: the drawer asks place_captions (strongest first) and fills exactly
    those rectangles, each with its own box's colour, so no caption covers another."""
    from oars_deploy.draw import boxes as drawer

    seen = {}

    def spy(boxes, sizes, image_shape):
        seen['boxes'], seen['rects'] = boxes, place_captions(boxes, sizes, image_shape)
        return seen['rects']

    monkeypatch.setattr(drawer, 'place_captions', spy)
    boxes = _crowd(40, 256, 3).astype(np.float32)
    scores = np.linspace(0.3, 0.99, 40)
    labels = np.arange(40) % 3
    out = draw_boxes(np.zeros((256, 256, 3), np.uint8), boxes, labels, scores, NAMES, PALETTE)
    order = np.argsort(scores, kind='stable')[::-1]
    assert np.array_equal(seen['boxes'], boxes[order].round().astype(np.int64))  # strongest first
    rects = seen['rects']
    assert _pairwise_overlaps(rects[rects[:, 0] >= 0]) == []
    for k, (left, top, right, bottom) in enumerate(rects):
        if left < 0:
            continue
        colour = PALETTE[labels[order[k]]][::-1].tolist()
        filled = (out[top:bottom + 1, left:right + 1] == colour).all(-1).mean()
        assert filled > 0.5, (k, filled)  # its own colour (the text covers the rest)
