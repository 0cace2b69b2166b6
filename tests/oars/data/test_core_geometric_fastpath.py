"""Resize / RandomResize / RandomCrop run albumentations' functional ops directly (no Compose per
sample) and give exactly what the Compose path gives; samples with boxes still go through Compose."""

from __future__ import annotations

import albumentations as A
import cv2
import numpy as np
import pytest

import oars.data.transforms.albu as albu
from oars.data.transforms import RandomCrop, RandomResize, Resize, rescale_size


def sample(h: int = 45, w: int = 61, seed: int = 0, seg_dtype=np.uint8) -> dict:
    rng = np.random.default_rng(seed)
    return {'img': rng.integers(0, 256, (h, w, 3), dtype=np.uint8),
            'gt_seg_map': rng.integers(0, 5, (h, w)).astype(seg_dtype), 'img_shape': (h, w)}


def via_compose(results: dict, transform: A.BasicTransform) -> dict:
    return albu.run_albu(dict(results), albu.build_compose([transform], with_boxes=False))


@pytest.fixture
def compose_builds(monkeypatch):
    calls = []
    real = albu.build_compose
    monkeypatch.setattr(albu, 'build_compose', lambda *a, **k: calls.append(a) or real(*a, **k))
    return calls


@pytest.mark.parametrize('seg_dtype', [np.uint8, np.int32])
def test_resize_equals_compose_and_builds_none(compose_builds, seg_dtype):
    for (h, w), scale, keep in [((45, 61), (40, 30), True), ((45, 61), (90, 100), False), ((20, 30), (64, 64), True)]:
        r = sample(h, w, seg_dtype=seg_dtype)
        new_w, new_h = rescale_size(w, h, scale) if keep else scale
        ref = via_compose(r, A.Resize(new_h, new_w, interpolation=cv2.INTER_LINEAR,
                                      mask_interpolation=cv2.INTER_NEAREST))
        compose_builds.clear()
        out = Resize(scale, keep_ratio=keep)(dict(r))
        assert compose_builds == []
        assert out['img_shape'] == (new_h, new_w) == ref['img_shape']
        for key in ('img', 'gt_seg_map'):
            assert out[key].dtype == ref[key].dtype and out[key].flags['C_CONTIGUOUS']
            assert np.array_equal(out[key], ref[key])


def test_random_crop_and_resize_equal_compose_and_stay_seeded(compose_builds):
    crop = RandomCrop((24, 32))
    for seed in range(4):
        r = sample(seed=seed)
        np.random.seed(seed)
        y1, y2, x1, x2 = crop._window(45, 61)
        ref = via_compose(r, A.Crop(x_min=x1, y_min=y1, x_max=x2, y_max=y2))
        compose_builds.clear()
        np.random.seed(seed)
        out = crop(dict(r))
        assert compose_builds == []
        assert out['img'].flags['C_CONTIGUOUS'] and out['gt_seg_map'].flags['C_CONTIGUOUS']
        assert np.array_equal(out['img'], ref['img']) and np.array_equal(out['gt_seg_map'], ref['gt_seg_map'])
    rr = RandomResize(scale=(64, 48), ratio_range=(0.5, 2.0))
    runs = []
    for _ in range(2):
        np.random.seed(11)
        runs.append([rr(sample(seed=i)) for i in range(3)])
    assert compose_builds == []
    for a, b in zip(*runs):
        assert np.array_equal(a['img'], b['img']) and np.array_equal(a['gt_seg_map'], b['gt_seg_map'])


def test_boxes_still_go_through_compose(compose_builds):
    r = sample(40, 60)
    r['gt_bboxes'] = np.array([[10, 4, 20, 14], [40, 30, 58, 38]], np.float32)
    r['gt_bboxes_labels'] = np.array([2, 1])
    out = Resize((30, 20), keep_ratio=False)(r)
    assert len(compose_builds) == 1 and out['img_shape'] == (20, 30)
    assert np.allclose(out['gt_bboxes'], [[5, 2, 10, 7], [20, 15, 29, 19]], atol=1e-3)
    # a crop window (drawn from numpy) that holds the first box and leaves out the second
    crop = RandomCrop((10, 15))
    seed = next(i for i in range(1000) if (np.random.seed(i), crop._window(20, 30))[1] == (0, 10, 0, 15))
    np.random.seed(seed)
    out = crop(out)
    assert len(compose_builds) == 2 and out['img_shape'] == (10, 15)
    assert out['gt_bboxes_labels'].tolist() == [2]
    assert np.allclose(out['gt_bboxes'], [[5, 2, 10, 7]], atol=1e-3)
