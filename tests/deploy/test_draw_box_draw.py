"""draw_boxes: class colours on the border, a new image, score threshold, readable captions, errors."""

import numpy as np
import pytest

from oars_deploy.draw import draw_boxes

NAMES = ['cat', 'dog']
PALETTE = np.array([[255, 0, 0], [0, 255, 0]], dtype=np.uint8)  # RGB


def test_border_has_class_colour_and_input_untouched():
    img = np.full((64, 64, 3), 30, dtype=np.uint8)
    before = img.copy()
    out = draw_boxes(img, np.array([[10, 30, 50, 60]]), np.array([0]), np.array([0.87]), NAMES, PALETTE)
    assert np.array_equal(img, before) and out is not img
    blue_bgr = [0, 0, 255]  # palette red, in BGR
    assert out[60, 30].tolist() == blue_bgr  # bottom edge
    assert out[45, 10].tolist() == blue_bgr and out[45, 50].tolist() == blue_bgr  # left and right edges
    assert out[45, 30].tolist() == [30, 30, 30]  # inside stays
    # caption box sits above the box, inside the image, with text pixels of another colour in it
    caption = out[14:30, 10:50]
    assert (caption == blue_bgr).all(-1).sum() > 50
    assert (~(caption == blue_bgr).all(-1) & ~(caption == 30).all(-1)).sum() > 10
    # deterministic
    again = draw_boxes(img, np.array([[10, 30, 50, 60]]), np.array([0]), np.array([0.87]), NAMES, PALETTE)
    assert np.array_equal(out, again)


def test_score_threshold_and_no_scores():
    img = np.zeros((64, 64, 3), dtype=np.uint8)
    boxes = np.array([[5, 20, 30, 40], [35, 20, 60, 40]], dtype=np.float32)
    out = draw_boxes(img, boxes, np.array([0, 1]), np.array([0.2, 0.9]), NAMES, PALETTE, score_thr=0.5)
    assert out[40, 15].tolist() == [0, 0, 0]  # filtered
    assert out[40, 45].tolist() == [0, 255, 0]  # kept, green
    out = draw_boxes(img, boxes, np.array([0, 1]), None, NAMES, PALETTE, score_thr=0.5)
    assert out[40, 15].tolist() == [0, 0, 255] and out[40, 45].tolist() == [0, 255, 0]
    assert np.array_equal(draw_boxes(img, np.zeros((0, 4)), np.zeros(0), None, NAMES), img)


def test_box_at_top_gets_caption_inside_and_lines_scale():
    img = np.zeros((64, 64, 3), dtype=np.uint8)
    out = draw_boxes(img, np.array([[0, 0, 63, 63]]), np.array([1]), None, NAMES, PALETTE)
    assert (out[1:10, 1:20] == [0, 255, 0]).all(-1).any()  # filled caption inside the top edge
    big = draw_boxes(np.zeros((1200, 1200, 3), np.uint8), np.array([[100, 100, 600, 600]]), np.array([0]),
                     None, NAMES, PALETTE)
    assert (big[600, 300:400] == [0, 0, 255]).all() and (big[602, 300:400] == [0, 0, 255]).all()  # 3-px line


@pytest.mark.parametrize('kwargs, match', [
    (dict(labels=np.array([2])), r'outside \[0, 2\)'),
    (dict(labels=np.array([0, 1])), '1 box but 2 labels'),
    (dict(scores=np.array([0.1, 0.2])), '2 scores'),
    (dict(img=np.zeros((8, 8), np.uint8)), 'uint8 BGR'),
])
def test_errors(kwargs, match):
    args = dict(img=np.zeros((8, 8, 3), np.uint8), bboxes=np.array([[1, 1, 5, 5]]), labels=np.array([0]),
                scores=None, class_names=NAMES)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        draw_boxes(**args)
