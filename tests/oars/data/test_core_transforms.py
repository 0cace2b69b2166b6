"""Core transforms: image and label map stay in sync, sizes follow mmcv's rules, randomness follows numpy."""

from __future__ import annotations

import albumentations as A
import cv2
import numpy as np
import pytest

from oars.data.transforms import (
    Albu,
    LoadImageFromFile,
    Normalize,
    Pad,
    PhotoMetricDistortion,
    RandomCrop,
    RandomFlip,
    RandomResize,
    Resize,
    rescale_size,
)
from oars.errors import DataError
from oars.registry import TRANSFORMS

# BGR colour of each class; the label map of a synthetic image is recovered from its colours.
COLOURS = np.array([[0, 0, 0], [255, 0, 0], [0, 255, 0], [0, 0, 255]], dtype=np.uint8)


def synthetic(h: int = 48, w: int = 64, cell: int = 8, seed: int = 0) -> dict:
    """Blocks of pure class colours; returns a results dict with img and gt_seg_map."""
    rng = np.random.default_rng(seed)
    cells = rng.integers(0, len(COLOURS), size=(h // cell + 1, w // cell + 1))
    seg = np.kron(cells, np.ones((cell, cell), dtype=np.int64))[:h, :w].astype(np.uint8)
    img = COLOURS[seg]
    return {'img': img.copy(), 'gt_seg_map': seg.copy(), 'img_shape': (h, w), 'ori_shape': (h, w)}


def seg_from_colours(img: np.ndarray) -> np.ndarray:
    dist = ((img[:, :, None, :].astype(np.int32) - COLOURS[None, None].astype(np.int32)) ** 2).sum(-1)
    return dist.argmin(-1).astype(np.uint8)


def find_window(big: np.ndarray, small: np.ndarray) -> tuple[int, int] | None:
    h, w = small.shape[:2]
    for y in range(big.shape[0] - h + 1):
        for x in range(big.shape[1] - w + 1):
            if np.array_equal(big[y:y + h, x:x + w], small):
                return y, x
    return None


def test_registered_in_core_registry():
    for name in ['LoadImageFromFile', 'Albu', 'Resize', 'RandomResize', 'RandomCrop', 'RandomFlip',
                 'PhotoMetricDistortion', 'Normalize', 'Pad']:
        assert TRANSFORMS.get(name) is not None, name


def test_load_image_bgr_and_errors(tmp_path):
    img = synthetic(16, 24)['img']
    path = tmp_path / 'a.png'
    cv2.imwrite(str(path), img)
    out = LoadImageFromFile()({'img_path': str(path)})
    assert np.array_equal(out['img'], img) and out['img'].dtype == np.uint8
    assert out['img_shape'] == out['ori_shape'] == (16, 24)
    assert LoadImageFromFile(to_float32=True)({'img_path': str(path)})['img'].dtype == np.float32
    assert LoadImageFromFile(color_type='grayscale')({'img_path': str(path)})['img'].shape == (16, 24)
    missing = tmp_path / 'nope.png'
    with pytest.raises(FileNotFoundError, match='nope.png'):
        LoadImageFromFile()({'img_path': str(missing)})
    broken = tmp_path / 'broken.png'
    broken.write_bytes(b'not an image')
    with pytest.raises(DataError, match='corrupt file.*broken.png') as err:  # it exists: not FileNotFoundError
        LoadImageFromFile()({'img_path': str(broken)})
    assert not isinstance(err.value, FileNotFoundError)
    with pytest.raises(ValueError, match='color_type'):
        LoadImageFromFile(color_type='rgb')


def test_flip_keeps_image_and_mask_in_sync():
    for direction, axis in [('horizontal', 1), ('vertical', 0)]:
        r = synthetic()
        img0, seg0 = r['img'].copy(), r['gt_seg_map'].copy()
        out = RandomFlip(prob=1.0, direction=direction)(r)
        assert out['flip'] is True and out['flip_direction'] == direction
        assert np.array_equal(out['img'], np.flip(img0, axis))
        assert np.array_equal(out['gt_seg_map'], np.flip(seg0, axis))
        assert np.array_equal(seg_from_colours(out['img']), out['gt_seg_map'])
    r = synthetic()
    out = RandomFlip(prob=0.0)(r)
    assert out['flip'] is False and out['flip_direction'] is None
    with pytest.raises(ValueError, match='direction'):
        RandomFlip(direction='diagonal')


def test_crop_keeps_image_and_mask_in_sync():
    np.random.seed(3)
    for _ in range(5):
        r = synthetic(seed=7)
        img0 = r['img'].copy()
        seg0 = r['gt_seg_map'].copy()
        out = RandomCrop(crop_size=(20, 30))(r)
        assert out['img'].shape[:2] == out['gt_seg_map'].shape == out['img_shape'] == (20, 30)
        assert np.array_equal(seg_from_colours(out['img']), out['gt_seg_map'])
        y, x = find_window(img0, out['img'])
        assert np.array_equal(seg0[y:y + 20, x:x + 30], out['gt_seg_map'])
    # a crop larger than the image keeps the image's size along that axis
    out = RandomCrop(crop_size=(100, 30))(synthetic())
    assert out['img_shape'] == (48, 30)


def test_resize_matches_opencv_and_mmcv_rule():
    assert rescale_size(500, 375, (2048, 512)) == (683, 512)  # short edge limits
    assert rescale_size(2000, 500, (2048, 512)) == (2048, 512)  # long edge limits (4:1)
    assert rescale_size(80, 60, (40, 40)) == (40, 30)
    r = synthetic(60, 80)
    img0, seg0 = r['img'].copy(), r['gt_seg_map'].copy()
    out = Resize(scale=(40, 40), keep_ratio=True)(r)
    assert out['img_shape'] == (30, 40) and out['gt_seg_map'].shape == (30, 40)
    assert out['ori_shape'] == (60, 80)
    assert out['scale_factor'] == pytest.approx((0.5, 0.5))
    assert np.array_equal(out['img'], cv2.resize(img0, (40, 30), interpolation=cv2.INTER_LINEAR))
    assert np.array_equal(out['gt_seg_map'], cv2.resize(seg0, (40, 30), interpolation=cv2.INTER_NEAREST))
    assert set(np.unique(out['gt_seg_map'])) <= set(np.unique(seg0))  # nearest: no invented labels
    out = Resize(scale=(50, 20), keep_ratio=False)(synthetic(60, 80))
    assert out['img_shape'] == (20, 50)
    out = Resize(scale=32)(synthetic(60, 80))
    assert out['img_shape'] == (24, 32)
    # upscaling a blocky image: colours and labels still agree away from block borders
    out = Resize(scale=(160, 120))(synthetic(60, 80, cell=10))
    agree = (seg_from_colours(out['img']) == out['gt_seg_map']).mean()
    assert agree > 0.9
    with pytest.raises(ValueError, match='Resize.scale'):
        Resize(scale=(10, 10, 3))


def test_random_resize_ratio_range_and_determinism():
    t = RandomResize(scale=(64, 48), ratio_range=(0.5, 2.0))
    sizes = set()
    for seed in range(6):
        np.random.seed(seed)
        ratio = np.random.random_sample() * 1.5 + 0.5
        expected = rescale_size(64, 48, (int(64 * ratio), int(48 * ratio)))
        np.random.seed(seed)
        out = t(synthetic(48, 64))
        assert out['img_shape'] == out['gt_seg_map'].shape == (expected[1], expected[0])
        sizes.add(out['img_shape'])
    assert len(sizes) > 3
    t2 = RandomResize(scale=[(32, 24), (64, 48)], ratio_range=None, keep_ratio=False)
    for seed in range(5):
        np.random.seed(seed)
        h, w = t2(synthetic(48, 64))['img_shape']
        assert 32 <= w <= 64 and 24 <= h <= 48


def _window_is_balanced(seg: np.ndarray, ratio: float, ignore: int = 255) -> bool:
    labels, counts = np.unique(seg, return_counts=True)
    counts = counts[labels != ignore]
    return len(counts) > 1 and counts.max() / counts.sum() < ratio


def test_cat_max_ratio_prefers_mixed_crops():
    seg = np.zeros((64, 64), np.uint8)
    seg[36:60, 36:60] = 1
    img = COLOURS[seg]
    ch = cw = 24
    # exact share of balanced windows among all the windows RandomCrop can draw
    windows = [seg[y:y + ch, x:x + cw] for y in range(64 - ch + 1) for x in range(64 - cw + 1)]
    p = np.mean([_window_is_balanced(w, 0.75) for w in windows])
    assert 0.05 < p < 0.4
    runs = 60

    def share(ratio: float) -> float:
        hits = 0
        for seed in range(runs):
            np.random.seed(seed)
            out = RandomCrop((ch, cw), cat_max_ratio=ratio)({'img': img.copy(), 'gt_seg_map': seg.copy()})
            assert np.array_equal(seg_from_colours(out['img']), out['gt_seg_map'])
            hits += _window_is_balanced(out['gt_seg_map'], 0.75)
        return hits / runs

    constrained, free = share(0.75), share(1.0)
    expected = 1 - (1 - p) ** 11  # first draw + 10 retries
    assert constrained > 0.75 and abs(constrained - expected) < 0.15
    assert free < 0.5 and free < constrained - 0.3


def test_cat_max_ratio_ignores_ignore_index_and_terminates():
    t = RandomCrop(8, cat_max_ratio=0.75, ignore_index=255)
    seg = np.array([0] * 10 + [255] * 100 + [1] * 5, np.uint8)
    assert t._balanced(seg)  # 10 vs 5 labelled pixels: 0.67 < 0.75; ignore not counted
    seg[:10] = 255
    assert not t._balanced(seg)  # a single labelled class is never balanced
    uniform = {'img': np.zeros((32, 32, 3), np.uint8), 'gt_seg_map': np.zeros((32, 32), np.uint8)}
    assert RandomCrop(8, cat_max_ratio=0.5)(uniform)['img_shape'] == (8, 8)


def test_pad_values_and_shapes():
    r = synthetic(30, 40)
    img0, seg0 = r['img'].copy(), r['gt_seg_map'].copy()
    out = Pad(size=(50, 40), pad_val=7, seg_pad_val=255)(r)
    assert out['img'].shape == (40, 50, 3) and out['gt_seg_map'].shape == (40, 50)
    assert out['pad_shape'] == (40, 50) and out['img_shape'] == (30, 40)
    assert np.array_equal(out['img'][:30, :40], img0) and np.array_equal(out['gt_seg_map'][:30, :40], seg0)
    assert (out['img'][30:] == 7).all() and (out['img'][:, 40:] == 7).all()
    assert (out['gt_seg_map'][30:] == 255).all() and (out['gt_seg_map'][:, 40:] == 255).all()
    out = Pad(size_divisor=16, pad_val=0, seg_pad_val=254)(synthetic(30, 40))
    assert out['pad_shape'] == (32, 48) and (out['gt_seg_map'][30:] == 254).all()
    out = Pad(size_divisor=8)(synthetic(32, 40))
    assert out['pad_shape'] == (32, 40)
    with pytest.raises(ValueError, match='exactly one'):
        Pad()
    with pytest.raises(ValueError, match='exactly one'):
        Pad(size=8, size_divisor=8)


def test_boxes_follow_the_image():
    r = synthetic(48, 64)
    r['gt_bboxes'] = np.array([[10, 5, 20, 15], [50, 30, 60, 40]], np.float32)
    r['gt_bboxes_labels'] = np.array([3, 1])
    out = RandomFlip(prob=1.0)(r)
    assert np.allclose(out['gt_bboxes'], [[44, 5, 54, 15], [4, 30, 14, 40]], atol=1e-3)
    assert out['gt_bboxes_labels'].tolist() == [3, 1]
    # a crop that excludes the first box drops it together with its label
    out = RandomCrop((20, 30))._apply(out, [A.Crop(0, 25, 30, 45)])
    assert out['gt_bboxes'].shape == (1, 4) and out['gt_bboxes_labels'].tolist() == [1]
    assert np.allclose(out['gt_bboxes'], [[4, 5, 14, 15]], atol=1e-3)


def test_albu_builds_by_name_and_reports_close_names():
    t = TRANSFORMS.build(dict(type='Albu', transforms=[dict(type='HorizontalFlip', p=1.0)]))
    r = synthetic()
    img0, seg0 = r['img'].copy(), r['gt_seg_map'].copy()
    out = t(r)
    assert np.array_equal(out['img'], img0[:, ::-1]) and np.array_equal(out['gt_seg_map'], seg0[:, ::-1])
    nested = Albu([dict(type='OneOf', transforms=[dict(type='Blur'), dict(type='MedianBlur')], p=1.0)])
    assert nested(synthetic())['img'].shape == (48, 64, 3)
    with pytest.raises(ValueError, match='HorizontalFlip'):
        Albu([dict(type='HorizontalFlp')])
    with pytest.raises(ValueError, match='RandomCrop'):
        Albu([dict(type='RandomCrop', height=8)])  # missing width


def test_albu_colour_ops_see_rgb():
    img = np.random.default_rng(0).integers(0, 256, (16, 16, 3), dtype=np.uint8)
    out = Albu([dict(type='ToGray', p=1.0, method='weighted_average')])({'img': img.copy()})
    expected = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
    assert np.abs(out['img'][..., 0].astype(int) - expected).max() <= 1


def test_photometric_changes_image_only_and_brightness_semantics():
    np.random.seed(0)
    t = PhotoMetricDistortion()
    changed = 0
    for _ in range(5):
        r = synthetic()
        seg0, img0 = r['gt_seg_map'].copy(), r['img'].copy()
        out = t(r)
        assert np.array_equal(out['gt_seg_map'], seg0) and out['img'].dtype == np.uint8
        changed += not np.array_equal(out['img'], img0)
    assert changed >= 3
    brightness_only = PhotoMetricDistortion(brightness_delta=20, contrast_range=(1, 1), saturation_range=(1, 1),
                                            hue_delta=0)
    img = np.full((8, 8, 3), 100, np.uint8)
    deltas = set()
    for seed in range(20):
        np.random.seed(seed)
        out = brightness_only({'img': img.copy()})['img'].astype(int) - 100
        assert (out == out.flat[0]).all() and abs(out.flat[0]) <= 20
        deltas.add(int(out.flat[0]))
    assert 0 in deltas and len(deltas) > 3  # applied about half of the time
    with pytest.raises(TypeError, match='uint8'):
        t({'img': np.zeros((4, 4, 3), np.float32)})


def test_pipeline_is_reproducible_under_numpy_seed():
    steps = [RandomResize(scale=(64, 48), ratio_range=(0.5, 1.5)), RandomCrop((32, 32)), RandomFlip(0.5),
             PhotoMetricDistortion(), Albu([dict(type='GaussNoise', p=1.0), dict(type='Rotate', limit=30, p=1.0)])]

    def run(seed: int) -> dict:
        np.random.seed(seed)
        r = synthetic(seed=1)
        for s in steps:
            r = s(r)
        return r

    a, b, c = run(5), run(5), run(6)
    assert np.array_equal(a['img'], b['img']) and np.array_equal(a['gt_seg_map'], b['gt_seg_map'])
    assert a['img'].shape != c['img'].shape or not np.array_equal(a['img'], c['img'])


def test_albu_steps_draw_independently():
    # two p=0.5 flips must give all four outcomes (identically seeded steps would always agree)
    t = Albu([dict(type='HorizontalFlip', p=0.5), dict(type='VerticalFlip', p=0.5)], bgr_to_rgb=False)
    img = np.arange(12, dtype=np.uint8).reshape(3, 4, 1).repeat(3, 2)
    outcomes: set[str] = set()
    variants = {'none': img, 'h': img[:, ::-1], 'v': img[::-1], 'hv': img[::-1, ::-1]}
    np.random.seed(0)
    for _ in range(40):
        out = t({'img': img.copy()})['img']
        outcomes |= {k for k, v in variants.items() if np.array_equal(out, v)}
    assert outcomes == set(variants)


def test_normalize():
    img = np.random.default_rng(1).integers(0, 256, (4, 5, 3), dtype=np.uint8)
    mean, std = [123.675, 116.28, 103.53], [58.395, 57.12, 57.375]
    out = Normalize(mean, std, to_rgb=True)({'img': img.copy()})
    expected = (img[..., ::-1].astype(np.float32) - np.array(mean, np.float32)) / np.array(std, np.float32)
    assert out['img'].dtype == np.float32 and np.allclose(out['img'], expected)
    out = Normalize(mean, std, to_rgb=False)({'img': img.copy()})
    assert np.allclose(out['img'], (img - np.array(mean)) / np.array(std), atol=1e-4)
    with pytest.raises(ValueError, match='same length'):
        Normalize([1, 2, 3], [1, 2])
