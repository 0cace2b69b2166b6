"""Crops: torchvision's center_crop / ten_crop as references, hand-computed ThreeCrop and TSN offsets, one box per
clip (frames carrying their pixel position must all report the same box)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torchvision.transforms.v2.functional as TF
from vid_clips import assert_frames_identical, marker_clip, origin, same_frames

from oars.errors import DataError
from video.registry import TRANSFORMS
from video.transforms import CenterCrop, MultiScaleCrop, RandomResizedCrop, TenCrop, ThreeCrop


def _nchw(imgs) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(np.asarray(imgs).transpose(0, 3, 1, 2)))


@pytest.mark.parametrize('w, h, crop', [(64, 48, 32), (64, 48, (33, 21)), (63, 47, (30, 20)), (64, 48, (64, 48))])
def test_center_crop_matches_torchvision(w, h, crop):
    clip = marker_clip(3, h, w)
    out = CenterCrop(crop)({'imgs': clip})
    cw, ch = (crop, crop) if isinstance(crop, int) else crop
    ref = TF.center_crop(_nchw(clip), [ch, cw])
    torch.testing.assert_close(_nchw(out['imgs']), ref, rtol=0, atol=0)
    assert out['img_shape'] == (ch, cw)
    x1, y1, x2, y2 = out['crop_bbox']
    assert (x2 - x1, y2 - y1) == (cw, ch)
    assert (origin(out['imgs']) == [x1, y1]).all()


def test_three_crop_slides_along_the_long_side():
    out = ThreeCrop(48)({'imgs': marker_clip(4, 48, 64), 'num_clips': 1, 'clip_len': 4})
    imgs = out['imgs']
    assert imgs.shape == (12, 48, 48, 3) and out['num_crops'] == 3
    # views-major: left (x 0), right (x 16), centre (x 8); each view holds frames 0..3 in order
    np.testing.assert_array_equal(origin(imgs), np.repeat([[0, 0], [16, 0], [8, 0]], 4, axis=0))
    np.testing.assert_array_equal(imgs[:, 0, 0, 2], np.tile([0, 10, 20, 30], 3))
    portrait = ThreeCrop(48)({'imgs': marker_clip(2, 64, 48)})['imgs']
    np.testing.assert_array_equal(origin(portrait), np.repeat([[0, 0], [0, 16], [0, 8]], 2, axis=0))
    # a crop smaller than the short side: centred on the other axis (48 - 40 = 8 -> y 4)
    small = ThreeCrop(40)({'imgs': marker_clip(1, 48, 64)})['imgs']
    np.testing.assert_array_equal(origin(small), [[0, 4], [24, 4], [12, 4]])


@pytest.mark.parametrize('crop', [32, (40, 30), (35, 27)])
def test_ten_crop_matches_torchvision_order(crop):
    clip = marker_clip(3, 48, 64)
    out = TenCrop(crop)({'imgs': clip, 'num_crops': 1})
    cw, ch = (crop, crop) if isinstance(crop, int) else crop
    refs = TF.ten_crop(_nchw(clip), [ch, cw])
    assert out['num_crops'] == 10 and out['imgs'].shape == (30, ch, cw, 3)
    torch.testing.assert_close(_nchw(out['imgs']), torch.cat(refs), rtol=0, atol=0)


def test_multi_view_crops_multiply_num_crops_and_keep_clips_in_order():
    imgs = marker_clip(6)  # 2 clips of 3 frames
    out = ThreeCrop(32)({'imgs': imgs, 'num_clips': 2, 'clip_len': 3})
    np.testing.assert_array_equal(out['imgs'][:, 0, 0, 2], np.tile(np.arange(6) * 10, 3))
    out = TenCrop(16)(out)
    assert out['num_crops'] == 30 and len(out['imgs']) == 180


def _boxes(t, w: int, h: int, draws: int) -> set[tuple[int, int, int, int]]:
    seen = set()
    for _ in range(draws):
        out = t({'imgs': marker_clip(1, h, w)})
        x1, y1, x2, y2 = (int(v) for v in out['crop_bbox'])
        seen.add((x1, y1, x2 - x1, y2 - y1))
    return seen


def test_multi_scale_crop_fixed_offsets_hand_computed():
    np.random.seed(0)
    # 100 x 100 frames, sides 100 and 50, aspect gap 0, the 5 fixed positions: quarter steps (100 - 50) // 4 = 12
    t = MultiScaleCrop(50, scales=(1, 0.5), max_wh_scale_gap=0, num_fixed_crops=5)
    expected = {(0, 0, 100, 100), (0, 0, 50, 50), (48, 0, 50, 50), (0, 48, 50, 50), (48, 48, 50, 50),
                (24, 24, 50, 50)}
    assert _boxes(t, 100, 100, 200) == expected
    # the 13 positions add edge midpoints and the points between centre and corners
    t13 = MultiScaleCrop(50, scales=(1, 0.5), max_wh_scale_gap=0)
    extra = {(0, 24), (48, 24), (24, 48), (24, 0), (12, 12), (36, 12), (12, 36), (36, 36)}
    assert _boxes(t13, 100, 100, 400) == expected | {(x, y, 50, 50) for x, y in extra}
    # aspect gap 1 adds the 100 x 50 and 50 x 100 boxes (free space only along one axis)
    gap = MultiScaleCrop(50, scales=(1, 0.5), max_wh_scale_gap=1, num_fixed_crops=5)
    wide = {(x, 0, 50, 100) for x in (0, 48, 24)} | {(0, y, 100, 50) for y in (0, 48, 24)}
    assert _boxes(gap, 100, 100, 400) == expected | wide


def test_multi_scale_crop_resizes_to_input_size_and_snaps_near_sizes():
    np.random.seed(1)
    # sides int(100 * 0.51) = 51: within 2 pixels of input 50 -> crop 50 (no resize needed)
    t = MultiScaleCrop((50, 50), scales=(0.51,), max_wh_scale_gap=0)
    assert {b[2:] for b in _boxes(t, 100, 100, 20)} == {(50, 50)}
    out = MultiScaleCrop(32)({'imgs': marker_clip(4, 48, 64)})
    assert out['imgs'].shape == (4, 32, 32, 3) and out['img_shape'] == (32, 32)
    rand = MultiScaleCrop(50, scales=(1, 0.5), max_wh_scale_gap=0, random_crop=True)
    for x, y, w, h in _boxes(rand, 100, 80, 100):
        assert (w, h) in {(80, 80), (40, 40)} and 0 <= x <= 100 - w and 0 <= y <= 80 - h


@pytest.mark.parametrize('t', [
    MultiScaleCrop(24),
    MultiScaleCrop(24, random_crop=True),
    RandomResizedCrop(),
    RandomResizedCrop(size=24),
    CenterCrop(20),
])
def test_random_crops_use_one_box_per_clip(t):
    np.random.seed(2)
    for _ in range(20):
        assert_frames_identical(t({'imgs': same_frames(4)})['imgs'])
        out = t({'imgs': marker_clip(4)})
        x1, y1 = out['crop_bbox'][:2]
        if out['imgs'].shape[1:3] == (out['crop_bbox'][3] - y1, out['crop_bbox'][2] - x1):  # not resized
            assert (origin(out['imgs']) == [x1, y1]).all()
        np.testing.assert_array_equal(out['imgs'][:, 0, 0, 2] // 10, [0, 1, 2, 3])


def test_random_resized_crop_box_statistics():
    np.random.seed(3)
    t = RandomResizedCrop(area_range=(0.2, 0.6), aspect_ratio_range=(0.5, 2.0))
    for _ in range(200):
        out = t({'imgs': marker_clip(2, 120, 160)})
        x1, y1, x2, y2 = out['crop_bbox']
        w, h = x2 - x1, y2 - y1
        assert 0 <= x1 and x2 <= 160 and 0 <= y1 and y2 <= 120
        assert 0.2 * 0.9 <= w * h / (160 * 120) <= 0.6 * 1.1  # rounding of the sides
        assert 0.5 * 0.85 <= w / h <= 2.0 * 1.15
        assert (origin(out['imgs']) == [x1, y1]).all()


def test_random_resized_crop_falls_back_to_the_centre_square():
    t = RandomResizedCrop(area_range=(0.9, 1.0), aspect_ratio_range=(3.0, 4.0))  # never fits a square frame
    out = t({'imgs': marker_clip(2, 100, 120)})
    np.testing.assert_array_equal(out['crop_bbox'], [10, 0, 110, 100])
    assert RandomResizedCrop(size=(30, 20))({'imgs': marker_clip(2)})['imgs'].shape == (2, 20, 30, 3)


def test_crop_larger_than_frames_is_an_error():
    with pytest.raises(DataError, match='v.mp4.*crop_size.*larger'):
        CenterCrop(100)({'imgs': marker_clip(2), 'filename': 'v.mp4'})
    with pytest.raises(DataError, match='crop_size'):
        TenCrop((65, 10))({'imgs': marker_clip(2)})


@pytest.mark.parametrize('build, match', [
    (lambda: CenterCrop(0), 'CenterCrop.crop_size'),
    (lambda: ThreeCrop((1, 2, 3)), 'ThreeCrop.crop_size'),
    (lambda: MultiScaleCrop(224, scales=(1.2,)), 'scales'),
    (lambda: MultiScaleCrop(224, num_fixed_crops=7), 'num_fixed_crops'),
    (lambda: MultiScaleCrop(224, max_wh_scale_gap=-1), 'max_wh_scale_gap'),
    (lambda: RandomResizedCrop(area_range=(0.5, 0.1)), 'area_range'),
    (lambda: RandomResizedCrop(aspect_ratio_range=(0, 1)), 'aspect_ratio_range'),
])
def test_bad_arguments_name_the_argument(build, match):
    with pytest.raises(DataError, match=match):
        build()


def test_registered_with_repr():
    t = TRANSFORMS.build(dict(type='MultiScaleCrop', input_size=224))
    assert repr(t) == ("MultiScaleCrop(input_size=(224, 224), scales=(1.0, 0.875, 0.75, 0.66), max_wh_scale_gap=1, "
                       "random_crop=False, num_fixed_crops=13, interpolation='bilinear')")
    assert repr(TRANSFORMS.build(dict(type='TenCrop', crop_size=[224, 200]))) == 'TenCrop(crop_size=(224, 200))'
    assert 'area_range=(0.08, 1.0)' in repr(RandomResizedCrop())
