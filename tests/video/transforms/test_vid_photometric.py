"""ColorJitter against torchvision's adjust_* on float RGB tensors, one draw per clip."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torchvision.transforms.v2.functional as TF
from vid_clips import assert_frames_identical, same_frames

from oars.errors import DataError
from video.registry import TRANSFORMS
from video.transforms import ColorJitter

_TV = {'brightness': TF.adjust_brightness, 'contrast': TF.adjust_contrast, 'saturation': TF.adjust_saturation,
       'hue': TF.adjust_hue}


def _reference(clip: np.ndarray, params: dict) -> np.ndarray:
    """torchvision on float RGB [N, 3, H, W] in [0, 1], the same factors and order; back to BGR 0..255."""
    x = torch.from_numpy(np.ascontiguousarray(clip[..., ::-1].transpose(0, 3, 1, 2))).float() / 255.0
    for name in params['order']:
        x = _TV[name](x, params[name])
    return (x * 255.0).numpy().transpose(0, 2, 3, 1)[..., ::-1]


def _clip(n: int = 3, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, 24, 32, 3), dtype=np.uint8)


@pytest.mark.parametrize('name, factor', [('brightness', 1.4), ('brightness', 0.6), ('contrast', 1.5),
                                          ('contrast', 0.5), ('saturation', 1.7), ('saturation', 0.3),
                                          ('hue', 0.1), ('hue', -0.35)])
def test_each_change_matches_torchvision(name, factor):
    clip = _clip()
    params = {'order': [name], name: factor}
    out = ColorJitter.apply(clip, params)
    assert out.dtype == np.uint8 and out.shape == clip.shape
    np.testing.assert_allclose(out.astype(np.float32), _reference(clip, params), atol=1.0 if name != 'hue' else 1.5)


def test_a_full_random_draw_matches_torchvision_and_is_in_range():
    np.random.seed(0)
    t = ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4, hue=0.2)
    orders = set()
    for _ in range(20):
        clip = _clip(2)
        out = t({'imgs': list(clip)})
        params = out['color_jitter']
        orders.add(tuple(params['order']))
        assert sorted(params['order']) == ['brightness', 'contrast', 'hue', 'saturation']
        for name in ('brightness', 'contrast', 'saturation'):
            assert 0.6 <= params[name] <= 1.4
        assert -0.2 <= params['hue'] <= 0.2
        np.testing.assert_allclose(out['imgs'].astype(np.float32), _reference(clip, params), atol=2.0)
    assert len(orders) > 5  # the order is drawn too


def test_one_draw_for_every_frame_of_the_clip():
    np.random.seed(1)
    t = TRANSFORMS.build(dict(type='ColorJitter'))
    for _ in range(5):
        out = t({'imgs': same_frames(4)})
        assert_frames_identical(out['imgs'])
        assert not np.array_equal(out['imgs'][0], same_frames(1)[0])


def test_zero_ranges_switch_changes_off():
    t = ColorJitter(brightness=0, contrast=0, saturation=(1.0, 1.0), hue=0)
    clip = _clip()
    out = t({'imgs': clip})
    assert out['color_jitter']['order'] == []
    assert out['imgs'] is clip
    only_hue = ColorJitter(brightness=0, contrast=0, saturation=0, hue=(0.1, 0.1))({'imgs': _clip()})
    assert only_hue['color_jitter'] == {'order': ['hue'], 'hue': 0.1}


@pytest.mark.parametrize('kwargs, match', [
    (dict(brightness=-0.1), 'brightness'),
    (dict(contrast=(1.5, 0.5)), 'contrast'),
    (dict(saturation='high'), 'saturation'),
    (dict(hue=0.6), 'hue'),
    (dict(hue=(-0.7, 0.1)), 'hue'),
])
def test_bad_arguments_name_the_argument(kwargs, match):
    with pytest.raises(DataError, match=match):
        ColorJitter(**kwargs)


def test_repr():
    assert repr(ColorJitter(brightness=0.2, contrast=0, saturation=(0.5, 1.5), hue=0.05)) == (
        'ColorJitter(brightness=(0.8, 1.2), contrast=(1.0, 1.0), saturation=(0.5, 1.5), hue=(-0.05, 0.05))')
