"""Report plots render to images and PNG files; bad inputs are refused."""

import cv2
import numpy as np
import pytest

from oars.visualization import plot_confusion_matrix, plot_per_class_bars

NAMES = ['background', 'circle', 'square']


def test_confusion_matrix_writes_png(tmp_path):
    cm = np.array([[50, 3, 2], [4, 40, 5], [0, 0, 0]])  # empty last row must not produce NaN
    out = tmp_path / 'sub' / 'cm.png'
    img = plot_confusion_matrix(cm, NAMES, out_path=out)
    assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3
    on_disk = cv2.imread(str(out))
    assert on_disk is not None and on_disk.shape == img.shape
    raw = plot_confusion_matrix(cm, NAMES, normalize=False)
    assert raw.shape == img.shape and not np.array_equal(raw, img)  # counts vs. fractions written


@pytest.mark.parametrize('cm, names, match', [
    (np.zeros((2, 3)), NAMES[:2], 'square'),
    (np.zeros((2, 2)), NAMES, '3 class names'),
    (np.array([[1, -1], [0, 1]]), NAMES[:2], 'non-negative'),
])
def test_confusion_matrix_errors(cm, names, match):
    with pytest.raises(ValueError, match=match):
        plot_confusion_matrix(cm, names)


def test_per_class_bars_writes_png_with_nan(tmp_path):
    out = tmp_path / 'bars.png'
    img = plot_per_class_bars({'background': 0.95, 'circle': float('nan'), 'square': 0.5}, 'IoU', out)
    assert cv2.imread(str(out)).shape == img.shape
    with pytest.raises(ValueError, match='empty'):
        plot_per_class_bars({}, 'IoU')
    with pytest.raises(ValueError, match='number'):
        plot_per_class_bars({'a': 'high'}, 'IoU')
    with pytest.raises(ValueError, match=r"infinite values for \['a'\]"):
        plot_per_class_bars({'a': float('inf')}, 'IoU')
