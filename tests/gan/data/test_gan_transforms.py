"""GAN transforms: paired random transforms keep A and B aligned, unpaired ones do not; packing per contract."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gan.registry import TRANSFORMS
from gan.structures import GANDataSample
from oars.errors import DataError

KEYS = ['img_A', 'img_B']


def _pix2pix(paired: bool = True):
    return [TRANSFORMS.build(dict(type='GANResize', keys=KEYS, scale=40, interpolation='nearest', paired=paired)),
            TRANSFORMS.build(dict(type='GANRandomCrop', keys=KEYS, crop_size=32, paired=paired)),
            TRANSFORMS.build(dict(type='GANFlip', keys=KEYS, prob=0.5, paired=paired))]


def _run(steps, results):
    for t in steps:
        results = t(results)
    return results


def test_paired_transforms_keep_b_a_pixelwise_function_of_a():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 200, (20, 24, 3), dtype=np.uint8)
    b_of = lambda x: (255 - x)[..., ::-1]  # noqa: E731  (B: a per-pixel function of A)
    steps = _pix2pix()
    np.random.seed(1)
    windows = set()
    for _ in range(12):
        out = _run(steps, {'img_A': a.copy(), 'img_B': np.ascontiguousarray(b_of(a)), 'img_A_path': 'a.png',
                           'img_B_path': 'b.png'})
        assert out['img_A'].shape == out['img_B'].shape == (32, 32, 3) and out['img_A'].dtype == np.uint8
        np.testing.assert_array_equal(out['img_B'], b_of(out['img_A']))  # same resize, crop window and flip
        windows.add(out['img_A'].tobytes())
    assert len(windows) > 3  # the crops and flips did vary
    np.random.seed(1)
    unpaired = _pix2pix(paired=False)
    differs = [not np.array_equal(o['img_B'], b_of(o['img_A'])) for o in
               (_run(unpaired, {'img_A': a.copy(), 'img_B': np.ascontiguousarray(b_of(a))}) for _ in range(6))]
    assert any(differs)  # each domain draws its own crop/flip
    np.random.seed(7)
    first = _run(steps, {'img_A': a.copy(), 'img_B': np.ascontiguousarray(b_of(a))})['img_A']
    np.random.seed(7)
    assert np.array_equal(first, _run(steps, {'img_A': a.copy(), 'img_B': np.ascontiguousarray(b_of(a))})['img_A'])
    with pytest.raises(DataError, match=r'img_A a.png is 24 x 20, img_B b.png is 24 x 21'):
        steps[0]({'img_A': a, 'img_B': np.zeros((21, 24, 3), np.uint8), 'img_A_path': 'a.png', 'img_B_path': 'b.png'})
    with pytest.raises(DataError, match='smaller than the crop 32 x 32'):
        steps[1]({'img_A': a, 'img_B': a, 'img_A_path': 'a.png'})


def test_albu_by_name_centre_crop_and_pack_contract():
    img = np.arange(10 * 12 * 3, dtype=np.uint8).reshape(10, 12, 3)
    centre = TRANSFORMS.build(dict(type='GANCenterCrop', crop_size=[6, 8]))({'img': img.copy()})
    np.testing.assert_array_equal(centre['img'], img[2:8, 2:10])
    albu = TRANSFORMS.build(dict(type='GANAlbu', keys=['img'], transforms=[dict(type='VerticalFlip', p=1.0)]))
    np.testing.assert_array_equal(albu({'img': img.copy()})['img'], img[::-1])
    with pytest.raises(DataError, match='not an albumentations transform'):
        TRANSFORMS.build(dict(type='GANAlbu', transforms=[dict(type='HorizontlFlip')]))

    pack = TRANSFORMS.build(dict(type='PackGANInputs', keys=['img', 'label', 'attrs']))
    out = pack({'img': img, 'label': np.int64(3), 'attrs': [1, 0, 1], 'img_path': 'x.png', 'sample_idx': 4,
                'ori_shape': (10, 12), 'img_shape': (10, 12), 'unrelated': 1})
    assert out['inputs']['img'].shape == (3, 10, 12) and out['inputs']['img'].dtype == torch.uint8
    assert torch.equal(out['inputs']['img'], torch.from_numpy(img).permute(2, 0, 1))
    assert out['inputs']['label'].dtype == torch.int64 and out['inputs']['label'].dim() == 0
    assert out['inputs']['attrs'].dtype == torch.float32 and out['inputs']['attrs'].tolist() == [1.0, 0.0, 1.0]
    sample = out['data_samples']
    assert isinstance(sample, GANDataSample) and sample.img_path == 'x.png' and sample.sample_idx == 4
    assert 'unrelated' not in sample.metainfo_keys()
    grey = TRANSFORMS.build(dict(type='PackGANInputs'))({'img': img[..., 0]})
    assert grey['inputs']['img'].shape == (1, 10, 12)
    with pytest.raises(DataError, match="no 'label' in the results of x.png"):
        pack({'img': img, 'img_path': 'x.png'})
    with pytest.raises(DataError, match='must be uint8'):
        pack({'img': img.astype(np.float32), 'label': 1, 'attrs': [1], 'img_path': 'x.png'})
