"""draw_instance_masks: translucent class-colour fill, score order and threshold, outlines, scaled masks, and the
detection picture with masks under the boxes."""

import numpy as np
import pytest

from oars_deploy.predictors.detection_boxes.draw import draw_detection_sample
from oars_deploy.predictors.detection_boxes.draw_masks import draw_instance_masks, instance_index_map

NAMES = ['cat', 'dog', 'bird']
PALETTE = np.array([[255, 0, 0], [0, 255, 0], [0, 0, 200]], dtype=np.uint8)  # RGB
BGR = PALETTE[:, ::-1].astype(np.float64)


def rect(h, w, y1, y2, x1, x2):
    m = np.zeros((h, w), bool)
    m[y1:y2, x1:x2] = True
    return m


def painter_reference(img, masks, labels, scores, thr, alpha):
    """Per-mask loop: paint colours from the lowest score up, then blend once where any mask was painted."""
    colour = np.zeros(img.shape, np.float32)  # float32 maths, as overlay_mask and draw_instance_masks
    covered = np.zeros(img.shape[:2], bool)
    for i in np.argsort(scores, kind='stable'):
        if scores[i] >= thr:
            colour[masks[i]] = BGR[labels[i]]
            covered |= masks[i]
    out = img.copy()
    blend = (1.0 - alpha) * img[covered].astype(np.float32) + alpha * colour[covered]
    out[covered] = np.clip(np.rint(blend), 0, 255).astype(np.uint8)
    return out


def test_fill_equals_a_per_mask_painter_loop():
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (40, 50, 3), dtype=np.uint8)
    masks = rng.uniform(size=(6, 40, 50)) < 0.3
    labels, scores = rng.integers(0, 3, 6), rng.uniform(size=6)
    before = img.copy()
    for alpha, thr in ((0.5, 0.0), (0.3, 0.4), (1.0, 0.9)):
        out = draw_instance_masks(img, masks, labels, PALETTE, scores=scores, score_thr=thr, alpha=alpha,
                                  outline=False)
        assert np.array_equal(out, painter_reference(img, masks, labels, scores, thr, alpha))
    assert np.array_equal(img, before)
    no_scores = draw_instance_masks(img, masks, labels, PALETTE, outline=False)  # later masks on top
    assert np.array_equal(no_scores, painter_reference(img, masks, labels, np.arange(6.0), 0.0, 0.5))


def test_high_score_on_top_threshold_and_outline():
    img = np.full((30, 30, 3), 100, np.uint8)
    masks = np.stack([rect(30, 30, 5, 20, 5, 20), rect(30, 30, 10, 25, 10, 25), rect(30, 30, 0, 4, 0, 4)])
    out = draw_instance_masks(img, masks, np.array([0, 1, 2]), PALETTE, scores=np.array([0.9, 0.5, 0.1]),
                              score_thr=0.2)
    assert out[12, 12].tolist() == [50, 50, 178]  # overlap: mask 0 (red, score 0.9) on top, blended 50/50
    assert out[22, 22].tolist() == [50, 178, 50]  # only mask 1 (green)
    assert out[2, 2].tolist() == [100, 100, 100]  # below the threshold
    assert out[5, 12].tolist() == [0, 0, 255]  # top border of mask 0: full colour
    assert out[15, 20].tolist() == [0, 255, 0]  # mask 1 where mask 0 ends: its own border colour
    idx = instance_index_map(masks, np.array([1, 0]))
    assert idx[12, 12] == 1 and idx[22, 22] == 0 and idx[2, 2] == -1


def test_masks_of_another_size_are_scaled_to_the_image():
    rng = np.random.default_rng(1)
    small = rng.uniform(size=(3, 20, 25)) < 0.4
    img = rng.integers(0, 256, (40, 50, 3), dtype=np.uint8)
    labels = np.array([0, 1, 2])
    big = small.repeat(2, axis=1).repeat(2, axis=2)
    assert np.array_equal(draw_instance_masks(img, small, labels, PALETTE, outline=False),
                          draw_instance_masks(img, big, labels, PALETTE, outline=False))


def test_detection_picture_draws_masks_under_boxes():
    img = np.full((40, 40, 3), 60, np.uint8)
    pred = {'bboxes': np.array([[5, 5, 30, 30]], np.float32), 'labels': np.array([1]), 'scores': np.array([0.8]),
            'masks': rect(40, 40, 8, 28, 8, 28)[None]}
    gt = {'bboxes': pred['bboxes'], 'labels': np.array([1]), 'masks': pred['masks']}
    plain = draw_detection_sample(img, {k: v for k, v in pred.items() if k != 'masks'}, NAMES, PALETTE, min_side=0)
    with_masks = draw_detection_sample(img, pred, NAMES, PALETTE, min_side=0)
    assert plain.shape == with_masks.shape
    diff = np.flatnonzero((plain != with_masks).any(axis=(0, 2)))
    assert diff.size > 0  # the fill changed the picture
    row = with_masks.shape[0] - 40 + 20  # image row 20, below the caption bar
    assert with_masks[row, 20].tolist() == [30, 158, 30]  # inside the mask: green fill over the grey image
    both = draw_detection_sample(img, pred, NAMES, PALETTE, gt=gt, min_side=0)
    assert both[row, 20].tolist() == [30, 158, 30]  # the gt panel fills its masks too
    low = draw_detection_sample(img, dict(pred, scores=np.array([0.1])), NAMES, PALETTE, min_side=0)
    assert low[row, 20].tolist() == [60, 60, 60]  # below score_thr: neither box nor mask


@pytest.mark.parametrize('kwargs, match', [
    (dict(labels=np.array([3])), r'outside \[0, 3\)'),
    (dict(labels=np.array([0, 1])), '1 masks but 2 labels'),
    (dict(scores=np.array([0.1, 0.2])), '2 scores'),
    (dict(masks=np.zeros((8, 8), bool)), r'\[K, H, W\]'),
    (dict(img=np.zeros((8, 8), np.uint8)), 'uint8 BGR'),
    (dict(alpha=1.5), r'alpha must be in \[0, 1\]'),
])
def test_errors(kwargs, match):
    args = dict(img=np.zeros((8, 8, 3), np.uint8), masks=np.ones((1, 8, 8), bool), labels=np.array([0]),
                palette=PALETTE)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        draw_instance_masks(**args)
