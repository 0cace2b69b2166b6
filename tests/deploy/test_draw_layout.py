"""side_by_side and make_grid: output shapes and where the pixels land."""

import numpy as np
import pytest

from oars_deploy.draw import make_grid, side_by_side


def test_side_by_side_resizes_to_common_height_and_captions():
    a = np.full((20, 30, 3), 50, dtype=np.uint8)
    a[:10] = 200
    b = np.full((40, 40), 90, dtype=np.uint8)  # grayscale, tallest
    c = np.full((10, 10, 3), 130, dtype=np.uint8)
    out = side_by_side([a, b, c], ['a', 'b', 'c'], gap=4)
    bar = out.shape[0] - 40
    assert bar > 0 and out.shape == (40 + bar, 60 + 40 + 40 + 2 * 4, 3)
    body = out[bar:]
    assert (body[:20, :60] == 200).all() and (body[20:, :60] == 50).all()  # nearest upscale x2
    assert (body[:, 64:104] == 90).all() and (body[:, 108:] == 130).all()
    assert (out[:bar, :60] > 0).any()  # caption text drawn
    assert (body[:, 60:64] == 0).all()


def test_side_by_side_errors():
    img = np.zeros((4, 4, 3), dtype=np.uint8)
    with pytest.raises(ValueError, match='2 panels but 1 titles'):
        side_by_side([img, img], ['x'])
    with pytest.raises(ValueError, match='no panels'):
        side_by_side([], [])
    with pytest.raises(ValueError, match='panel 1: images must be uint8'):
        side_by_side([img, img.astype(np.float32)], ['x', 'y'])


def test_make_grid_shape_and_placement():
    imgs = [np.full((10, 12, 3), 10 * (i + 1), dtype=np.uint8) for i in range(5)]
    grid = make_grid(imgs, ncols=3, pad=4)
    assert grid.shape == (2 * 10 + 3 * 4, 3 * 12 + 4 * 4, 3)
    assert (grid[4:14, 4:16] == 10).all() and (grid[4:14, 36:48] == 30).all()
    assert (grid[18:28, 20:32] == 50).all()  # 5th image: row 1, col 1
    assert (grid[18:28, 36:48] == 0).all()  # empty cell stays pad value
    assert make_grid(imgs[:2], ncols=5, pad=0).shape == (10, 24, 3)  # ncols capped at the image count
    mixed = make_grid([np.zeros((6, 6), np.uint8), np.full((8, 4, 3), 9, np.uint8)], ncols=2, pad=1, pad_value=255)
    assert mixed.shape == (8 + 2, 2 * 6 + 3, 3) and (mixed[1:9, 8:12] == 9).all() and mixed[8, 1, 0] == 255


def test_make_grid_errors():
    with pytest.raises(ValueError, match='no images'):
        make_grid([], 2)
    with pytest.raises(ValueError, match='ncols'):
        make_grid([np.zeros((2, 2), np.uint8)], 0)
    with pytest.raises(ValueError, match=r'image 0: images must be \(H, W\) or \(H, W, 3\)'):
        make_grid([np.zeros((2, 2, 4), np.uint8)], 1)
