"""get_palette: deterministic distinct defaults and validation of user palettes."""

import numpy as np
import pytest

from oars_deploy.draw import get_palette


def test_default_palette_is_voc_style_deterministic_and_distinct():
    pal = get_palette(256)
    assert pal.shape == (256, 3) and pal.dtype == np.uint8
    assert np.array_equal(pal, get_palette(256))
    # first PASCAL VOC colours, hand-listed
    assert pal[:6].tolist() == [[0, 0, 0], [128, 0, 0], [0, 128, 0], [128, 128, 0], [0, 0, 128], [128, 0, 128]]
    assert pal[15].tolist() == [192, 128, 128]  # VOC 'person'
    assert len({tuple(c) for c in get_palette(1000).tolist()}) == 1000
    assert np.array_equal(get_palette(3), pal[:3])


def test_given_palette_is_returned_as_uint8():
    pal = get_palette(2, [[1, 2, 3], [255, 0, 7.0]])
    assert pal.dtype == np.uint8 and pal.tolist() == [[1, 2, 3], [255, 0, 7]]


@pytest.mark.parametrize('num_classes, palette, match', [
    (0, None, 'positive integer'),
    (2.0, None, 'positive integer'),
    (3, [[0, 0, 0], [1, 1, 1]], '2 colours but there are 3 classes'),
    (2, [[0, 0], [1, 1]], r'shape \[num_classes, 3\]'),
    (2, [[0, 0, 0], [1, 1]], '3 values'),
    (2, [[0, 0, 0], [1, 256, 1]], r'palette\[1\]\[1\] = 256'),
    (2, [[0, -1, 0], [1, 1, 1]], r'palette\[0\]\[1\] = -1'),
    (1, [[0.5, 0, 0]], r'palette\[0\]\[0\] = 0.5'),
    (1, [[np.nan, 0, 0]], 'not an integer'),
    (1, [['a', 'b', 'c']], 'dtype'),
])
def test_bad_palettes_raise_clear_errors(num_classes, palette, match):
    with pytest.raises(ValueError, match=match):
        get_palette(num_classes, palette)
