"""Pictures of small images are readable: whole-factor enlargement before drawing (segmentation rows, detection
panels with their boxes scaled) and box captions that avoid each other."""

import numpy as np
import pytest

from oars_deploy.draw import draw_boxes
from oars_deploy.draw.boxes import _caption_rect
from oars_deploy.draw.layout import enlarge, enlarge_factor
from oars_deploy.predictors.detection_boxes.draw import draw_detection_sample
from oars_deploy.predictors.semantic_labels.draw import draw_sample

PALETTE = np.array([[0, 0, 0], [255, 0, 0], [0, 255, 0]], dtype=np.uint8)  # RGB
NAMES = ['background', 'circle', 'square']


@pytest.mark.parametrize('hw, min_side, factor', [((128, 128), 384, 3), ((128, 100), 256, 3), ((64, 64), 64, 1),
                                                  ((500, 400), 384, 1), ((30, 30), 0, 1)])
def test_enlarge_factor(hw, min_side, factor):
    assert enlarge_factor(*hw, min_side) == factor


def test_enlarge_repeats_pixels_exactly():
    ids = np.arange(6, dtype=np.int64).reshape(2, 3)
    big = enlarge(ids, 2)
    assert big.shape == (4, 6) and big.dtype == np.int64
    assert (big[::2, ::2] == ids).all() and (big[1::2, 1::2] == ids).all()
    assert enlarge(ids, 1) is ids


def test_segmentation_row_of_a_small_image_is_enlarged():
    img = np.full((128, 128, 3), 90, np.uint8)
    pred = np.zeros((128, 128), np.int64)
    pred[10:20, 30:40] = 1
    row = draw_sample(img, pred, PALETTE, gt=pred, class_names=NAMES)
    bar = row.shape[0] - 256
    assert 0 < bar < 60  # caption bar above 256-px panels
    pred_panel = row[bar:, 2 * (256 + 4): 3 * 256 + 2 * 4]  # image | ground truth | prediction | overlay
    assert pred_panel[2 * 15, 2 * 35].tolist() == [0, 0, 255] and pred_panel[2 * 50, 2 * 50].tolist() == [0, 0, 0]
    assert draw_sample(img, pred, PALETTE, min_side=0).shape[0] < 128 + 60  # the size kept on request


def test_detection_panel_enlarges_image_and_boxes():
    img = np.full((128, 128, 3), 90, np.uint8)
    pred = {'bboxes': np.array([[20, 40, 60, 80]], np.float32), 'labels': np.array([2]), 'scores': np.array([0.9])}
    out = draw_detection_sample(img, pred, NAMES, PALETTE)
    top = out.shape[0] - 384
    assert out.shape[1] == 384 and top > 0
    panel = out[top:]
    assert panel[3 * 80, 3 * 40].tolist() == [0, 255, 0]  # bottom edge at the scaled box
    assert panel[3 * 60, 3 * 40].tolist() == [90, 90, 90]  # inside stays


def test_neighbouring_captions_do_not_overlap():
    placed = [(10, 20, 60, 32)]
    rect = _caption_rect((12, 33, 50, 70), 50, 12, 128, 128, placed)  # above would overlap: inside the top edge
    assert rect[1] > placed[0][3]
    rect = _caption_rect((12, 33, 50, 70), 50, 12, 128, 128, placed + [(10, 33, 60, 45)])
    assert rect[1] == 71  # below the box
    assert _caption_rect((0, 0, 127, 127), 50, 12, 128, 128, placed)[1] == 0  # no free place: the first in view

    img = np.zeros((200, 200, 3), np.uint8)
    boxes = np.array([[40, 80, 100, 140], [60, 82, 120, 150]], np.float32)  # overlapping boxes, tops 2 px apart
    out = draw_boxes(img, boxes, np.array([1, 2]), np.array([0.6, 0.9]), NAMES, PALETTE)
    red = (out == [0, 0, 255]).all(-1)
    green = (out == [0, 255, 0]).all(-1)
    red_rows = np.flatnonzero(red[:, 45:95].sum(1) > 30)  # filled caption rows of the weaker box
    green_rows = np.flatnonzero(green[:, 65:115].sum(1) > 30)
    assert red_rows.size >= 4 and green_rows.size >= 4  # both captions drawn
    assert green_rows.max() <= 82 < red_rows.min()  # the strongest above its box (line at 82), the other moved
