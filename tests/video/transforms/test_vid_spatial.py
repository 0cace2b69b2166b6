"""Resize and Flip: sizes by hand, cv2 as the per-frame reference, one parameter set per clip, label map."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from vid_clips import assert_frames_identical, marker_clip, same_frames

from oars.errors import DataError
from video.registry import TRANSFORMS
from video.transforms import Flip, Resize


def _frames(w: int, h: int, n: int = 3) -> dict:
    return {'imgs': same_frames(n, h, w), 'filename': 'v.mp4'}


@pytest.mark.parametrize('kwargs, size', [
    (dict(short_side=256), (341, 256)),                  # 320 * 256 / 240 = 341.3
    (dict(scale=[-1, 256]), (341, 256)),                 # MMAction2's short-side form
    (dict(scale=(256, -1)), (341, 256)),
    (dict(scale=[340, 256]), (340, 255)),                # fit: min(340 / 320, 256 / 240) = 1.0625
    (dict(scale=[224, 224], keep_ratio=False), (224, 224)),
    (dict(scale=0.5), (160, 120)),
])
def test_resize_sizes(kwargs, size):
    out = Resize(**kwargs)(_frames(320, 240))
    assert out['imgs'].shape == (3, size[1], size[0], 3)
    assert out['img_shape'] == (size[1], size[0])
    np.testing.assert_allclose(out['scale_factor'], [size[0] / 320, size[1] / 240], rtol=1e-6)


def test_resize_short_side_of_portrait_frames():
    out = Resize(short_side=128)(_frames(90, 160))
    assert out['img_shape'] == (228, 128)  # 160 * 128 / 90 = 227.6


def test_resize_equals_cv2_per_frame_and_keeps_frames_consistent():
    results = {'imgs': marker_clip(4)}
    ref = [cv2.resize(f, (40, 30), interpolation=cv2.INTER_LINEAR) for f in results['imgs']]
    out = Resize(scale=[40, 30], keep_ratio=False)(results)
    np.testing.assert_array_equal(out['imgs'], np.stack(ref))
    assert_frames_identical(Resize(short_side=100)(_frames(64, 48))['imgs'])


def test_resize_to_the_same_size_is_a_no_op():
    clip = np.stack(same_frames(2))
    out = Resize(scale=[64, 48], keep_ratio=False)({'imgs': clip})
    assert out['imgs'] is clip


@pytest.mark.parametrize('kwargs, match', [
    (dict(), 'exactly one of scale and short_side'),
    (dict(scale=[1, 2], short_side=2), 'exactly one'),
    (dict(short_side=0), 'short_side'),
    (dict(scale=[-1, 256], keep_ratio=False), 'keep_ratio'),
    (dict(scale=[256]), 'scale'),
    (dict(scale=-0.5), 'scale'),
    (dict(short_side=8, interpolation='cubic'), 'interpolation'),
])
def test_resize_bad_arguments(kwargs, match):
    with pytest.raises(DataError, match=match):
        Resize(**kwargs)


def test_resize_rejects_frames_of_different_sizes():
    with pytest.raises(DataError, match='v.mp4.*one size'):
        Resize(short_side=8)({'imgs': same_frames(1, 8, 8) + same_frames(1, 8, 9), 'filename': 'v.mp4'})


def test_flip_mirrors_every_frame_the_same_way():
    results = Flip(prob=1.0)({'imgs': marker_clip(4), 'label': 3})
    imgs = results['imgs']
    assert results['flip'] and results['flip_direction'] == 'horizontal'
    np.testing.assert_array_equal(imgs, np.stack(marker_clip(4))[:, :, ::-1])
    assert (imgs[:, :, 0, 0] == 63).all()  # every frame's left column came from x = 63
    np.testing.assert_array_equal(imgs[:, 0, 0, 2], [0, 10, 20, 30])  # frame order kept
    assert results['label'] == 3
    vertical = Flip(prob=1.0, direction='vertical')({'imgs': marker_clip(2)})['imgs']
    assert (vertical[:, 0, :, 1] == 47).all()


def test_flip_draws_once_per_clip():
    np.random.seed(0)
    flips = []
    for _ in range(200):
        out = Flip(prob=0.5)({'imgs': same_frames(3)})
        assert_frames_identical(out['imgs'])
        flips.append(out['flip'])
    assert 70 < sum(flips) < 130
    out = Flip(prob=0.0)({'imgs': marker_clip(2)})
    assert not out['flip']
    np.testing.assert_array_equal(out['imgs'], np.stack(marker_clip(2)))


def test_flip_label_map_swaps_mirrored_classes():
    flip = TRANSFORMS.build(dict(type='Flip', prob=1.0, flip_label_map={0: 1, 1: 0, 4: 5, 5: 4}))
    assert flip({'imgs': same_frames(2), 'label': 0})['label'] == 1
    assert flip({'imgs': same_frames(2), 'label': 2})['label'] == 2  # up stays up
    assert flip({'imgs': same_frames(2), 'label': [1, 2, 5]})['label'] == [0, 2, 4]  # multi-label
    no_flip = Flip(prob=0.0, flip_label_map={0: 1})
    assert no_flip({'imgs': same_frames(2), 'label': 0})['label'] == 0


@pytest.mark.parametrize('kwargs, match', [
    (dict(prob=1.5), 'prob'),
    (dict(direction='diagonal'), 'direction'),
    (dict(flip_label_map={'left': 'right'}), 'flip_label_map'),
])
def test_flip_bad_arguments(kwargs, match):
    with pytest.raises(DataError, match=match):
        Flip(**kwargs)


def test_reprs():
    assert repr(Resize(scale=[-1, 256])) == "Resize(scale=[-1, 256], keep_ratio=True, interpolation='bilinear')"
    assert repr(Flip(prob=0.5, flip_label_map={0: 1})) == (
        "Flip(prob=0.5, direction='horizontal', flip_label_map={0: 1})")
