"""colorize_mask / overlay_mask / draw_legend on tiny hand-computed cases."""

import numpy as np
import pytest

from oars_deploy.draw import colorize_mask, draw_legend, overlay_mask

PAL = [[255, 0, 0], [0, 255, 0], [10, 20, 30]]  # RGB
MASK = np.array([[0, 1, 2], [255, 2, 0]], dtype=np.uint8)


def test_colorize_exact_bgr_values_and_black_ignore():
    out = colorize_mask(MASK, PAL)
    assert out.dtype == np.uint8 and out.shape == (2, 3, 3)
    expected = np.array([[[0, 0, 255], [0, 255, 0], [30, 20, 10]],
                         [[0, 0, 0], [30, 20, 10], [0, 0, 255]]], dtype=np.uint8)
    assert np.array_equal(out, expected)


def test_colorize_negative_ignore_index_and_no_ignore():
    mask = np.array([[-1, 2]], dtype=np.int64)
    assert colorize_mask(mask, PAL, ignore_index=-1).tolist() == [[[0, 0, 0], [30, 20, 10]]]
    with pytest.raises(ValueError, match=r'\[255\]'):
        colorize_mask(MASK, PAL, ignore_index=None)


@pytest.mark.parametrize('mask, match', [
    (np.array([[0, 5]]), r'ids \[5\] outside \[0, 3\)'),
    (np.zeros((2, 2, 1), dtype=np.uint8), '2-D'),
    (np.zeros((2, 2), dtype=np.float32), 'integer'),
])
def test_colorize_rejects_bad_masks(mask, match):
    with pytest.raises(ValueError, match=match):
        colorize_mask(mask, PAL)


def test_overlay_hand_computed_blend_keeps_ignored_pixels():
    img = np.full((2, 3, 3), (10, 20, 31), dtype=np.uint8)
    out = overlay_mask(img, MASK, PAL, alpha=0.5)
    # class 0 = RGB red -> BGR (0, 0, 255): (10+0)/2, (20+0)/2, (31+255)/2
    assert out[0, 0].tolist() == [5, 10, 143]
    assert out[0, 1].tolist() == [5, 138, 16]  # green: 10/2, (20+255)/2=137.5 -> 138 (half to even), 31/2=15.5 -> 16
    assert out[0, 2].tolist() == [20, 20, 20]  # BGR (30,20,10): (10+30)/2, (20+20)/2, (31+10)/2=20.5 -> 20
    assert out[1, 0].tolist() == [10, 20, 31]  # ignored: untouched
    quarter = overlay_mask(img, MASK, PAL, alpha=0.25)
    assert quarter[0, 0].tolist() == [8, 15, 87]  # 7.5 -> 8, 15, 23.25 + 63.75 = 87
    assert np.array_equal(overlay_mask(img, MASK, PAL, alpha=0.0), img)
    full = overlay_mask(img, MASK, PAL, alpha=1.0)
    assert np.array_equal(full[0], colorize_mask(MASK, PAL)[0]) and full[1, 0].tolist() == [10, 20, 31]


def test_overlay_rejects_mismatches():
    img = np.zeros((2, 3, 3), dtype=np.uint8)
    with pytest.raises(ValueError, match='differs from image size'):
        overlay_mask(img, MASK.T, PAL)
    with pytest.raises(ValueError, match='alpha'):
        overlay_mask(img, MASK, PAL, alpha=1.5)
    with pytest.raises(ValueError, match='uint8'):
        overlay_mask(img.astype(np.float32), MASK, PAL)


def test_draw_legend_appends_panel_with_present_classes_only():
    img = np.full((8, 10, 3), 77, dtype=np.uint8)
    names = ['road', 'car', 'sky']
    out = draw_legend(img, names, PAL, present_only_ids=[2, 255, 0])
    assert out.shape[1] > 10 and out.shape[0] >= 8
    assert np.array_equal(out[:8, :10], img)
    panel = out[:, 10:].reshape(-1, 3)

    def has(bgr):
        return bool((panel == bgr).all(axis=1).any())

    assert has([0, 0, 255]) and has([30, 20, 10])  # road and sky swatches
    assert not has([0, 255, 0])  # car is absent
    full = draw_legend(img[..., 0], names, PAL)  # grayscale accepted, all classes listed
    assert full.shape[0] > out.shape[0] - 1 and (full[:, 10:].reshape(-1, 3) == [0, 255, 0]).all(1).any()
    with pytest.raises(ValueError, match='2 class names but the palette has 3'):
        draw_legend(img, names[:2], PAL)


def test_enlarged_drawing_equals_drawing_the_enlarged_inputs():
    """Colours and overlay drawn at the image's size then enlarged are the pixels of drawing the enlarged image and
    label map (the cheaper order draw_sample uses); ids_present is np.unique."""
    from oars_deploy.draw import get_palette
    from oars_deploy.predictors.semantic_labels.draw import draw_sample, ids_present

    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (60, 90, 3), dtype=np.uint8)
    pred = rng.integers(0, 4, (60, 90))
    gt = pred.copy()
    gt[:5] = 255
    pal = get_palette(4)
    big = [np.repeat(np.repeat(a, 5, axis=0), 5, axis=1) for a in (img, pred, gt)]
    fast = draw_sample(img, pred, pal, gt=gt, class_names=list("abcd"), min_side=256)
    slow = draw_sample(*big[:2], pal, gt=big[2], class_names=list("abcd"), min_side=0)
    np.testing.assert_array_equal(fast, slow)
    for mask in (pred, gt, np.zeros((0, 3), np.int64), np.array([[-1, 2], [2, 7]])):
        np.testing.assert_array_equal(ids_present(mask), np.unique(mask))
