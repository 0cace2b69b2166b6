"""FormatShape layouts (views-major, clips and crops) and packing (uint8 inputs, single / multi-hot gt_label)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from vid_clips import marker_clip

from oars.errors import DataError
from video.registry import TRANSFORMS
from video.structures import ActionDataSample
from video.transforms import FormatShape, PackActionInputs, PackFeatureInputs, SampleFrames, ThreeCrop


def _results(num_clips: int, clip_len: int, h: int = 8, w: int = 10) -> dict:
    return {'imgs': marker_clip(num_clips * clip_len, h, w), 'num_clips': num_clips, 'clip_len': clip_len}


def test_nchw_shape_and_order():
    out = FormatShape('NCHW')(_results(2, 3))
    assert out['imgs'].shape == (6, 3, 8, 10) and out['imgs'].flags.c_contiguous
    assert out['input_shape'] == (6, 3, 8, 10) and out['num_crops'] == 1
    np.testing.assert_array_equal(out['imgs'][:, 2, 0, 0], np.arange(6) * 10)  # channel 2 carries the frame
    np.testing.assert_array_equal(out['imgs'][0, 0, 0], np.arange(10))  # channel 0 carries x


def test_ncthw_shape_and_order():
    out = FormatShape('NCTHW')(_results(2, 3))
    assert out['imgs'].shape == (2, 3, 3, 8, 10) and out['imgs'].flags.c_contiguous
    np.testing.assert_array_equal(out['imgs'][:, 2, :, 0, 0], [[0, 10, 20], [30, 40, 50]])
    np.testing.assert_array_equal(out['imgs'][1, 1, 2, :, 0], np.arange(8))  # channel 1 carries y


@pytest.mark.parametrize('fmt, shape', [('NCHW', (3 * 2 * 4, 3, 8, 8)), ('NCTHW', (3 * 2, 3, 4, 8, 8))])
def test_multiple_crops_and_clips(fmt, shape):
    out = FormatShape(fmt)(ThreeCrop(8)(_results(2, 4)))
    assert out['imgs'].shape == shape and out['num_crops'] == 3
    if fmt == 'NCTHW':  # view c * num_clips + k holds crop c of clip k: frames 4k .. 4k + 3
        frames = out['imgs'][:, 2, :, 0, 0] // 10
        np.testing.assert_array_equal(frames, np.tile(np.arange(8).reshape(2, 4), (3, 1)))
        np.testing.assert_array_equal(out['imgs'][:, 0, 0, 0, 0], [0, 0, 2, 2, 1, 1])  # left, right, centre x


def test_frame_count_mismatch_is_explained():
    with pytest.raises(DataError, match=r'v.mp4: FormatShape got 5 frames.*1 x 2 x 3 = 6'):
        FormatShape()({**_results(1, 5), 'num_clips': 2, 'clip_len': 3, 'filename': 'v.mp4'})
    with pytest.raises(DataError, match='input_format'):
        FormatShape('NHWC')


def _packed(label, multi_label=False, num_classes=8) -> dict:
    results = FormatShape('NCTHW')(_results(1, 4))
    results.update(label=label, multi_label=multi_label, num_classes=num_classes, filename='/d/v.mp4',
                   frame_inds=np.arange(4), total_frames=20, original_shape=(8, 10))
    return PackActionInputs()(results)


def test_pack_single_label():
    packed = _packed(3)
    assert packed['inputs'].dtype == torch.uint8 and packed['inputs'].shape == (1, 3, 4, 8, 10)
    sample = packed['data_samples']
    assert isinstance(sample, ActionDataSample)
    assert sample.gt_label.dtype == torch.long and sample.gt_label.tolist() == [3]
    assert sample.filename == '/d/v.mp4' and sample.num_clips == 1 and sample.clip_len == 4
    assert sample.num_crops == 1 and sample.img_shape == (8, 10) and sample.total_frames == 20
    np.testing.assert_array_equal(sample.frame_inds, np.arange(4))


def test_pack_multi_hot_label():
    sample = _packed([1, 5], multi_label=True)['data_samples']
    assert sample.gt_label.dtype == torch.float32
    assert sample.gt_label.tolist() == [0, 1, 0, 0, 0, 1, 0, 0]


def test_pack_without_label_for_inference():
    results = FormatShape()(_results(1, 2))
    sample = PackActionInputs()(results)['data_samples']
    assert 'gt_label' not in sample


@pytest.mark.parametrize('label, multi, match', [(8, False, r'outside \[0, 7\]'), ([1, 9], True, 'outside'),
                                                 ([1, 2], False, 'multi_label is false')])
def test_pack_bad_labels(label, multi, match):
    with pytest.raises(DataError, match=match):
        _packed(label, multi_label=multi)


def test_pack_needs_format_shape():
    with pytest.raises(DataError, match='put FormatShape before it'):
        PackActionInputs()(_results(1, 2))


def test_pack_features():
    feats = {'rgb': np.random.rand(6, 16), 'audio': np.random.rand(6, 4).astype(np.float32)}
    packed = PackFeatureInputs()({'features': feats, 'num_frames': 4, 'label': [0, 2], 'multi_label': True,
                                  'num_classes': 3, 'filename': 'f.npz'})
    assert list(packed['inputs']) == ['audio', 'rgb']
    assert all(v.dtype == torch.float32 for v in packed['inputs'].values())
    assert packed['inputs']['rgb'].shape == (6, 16)
    sample = packed['data_samples']
    assert sample.num_frames == 4 and sample.gt_label.tolist() == [1, 0, 1]
    only = PackFeatureInputs(modalities=['rgb'])({'features': feats, 'label': 1, 'num_classes': 3})
    assert list(only['inputs']) == ['rgb'] and only['data_samples'].num_frames == 6
    assert only['data_samples'].gt_label.tolist() == [1]


@pytest.mark.parametrize('results, match', [
    ({'features': {'rgb': np.zeros((6, 4)), 'audio': np.zeros((5, 2))}}, 'one T'),
    ({'features': {'rgb': np.zeros((6, 4))}, 'num_frames': 7}, 'num_frames'),
    ({'features': {}}, 'LoadFeatures'),
])
def test_pack_features_errors(results, match):
    with pytest.raises(DataError, match=match):
        PackFeatureInputs()(results)


def test_registry_pipeline_end_to_end():
    """SampleFrames -> (a decode stand-in that returns frames marked with their index) -> the 3D test pipeline."""
    cfg = [dict(type='SampleFrames', clip_len=4, frame_interval=2, num_clips=2, test_mode=True),
           dict(type='Resize', scale=[-1, 16]), dict(type='ThreeCrop', crop_size=16),
           dict(type='FormatShape', input_format='NCTHW'), dict(type='PackActionInputs')]
    steps = [TRANSFORMS.build(c) for c in cfg]
    results = steps[0]({'total_frames': 40, 'label': 2, 'num_classes': 8, 'filename': 'v.mp4'})
    results['imgs'] = [np.full((24, 32, 3), i, dtype=np.uint8) for i in results['frame_inds']]
    results['original_shape'] = results['img_shape'] = (24, 32)
    for step in steps[1:]:
        results = step(results)
    assert results['inputs'].shape == (6, 3, 4, 16, 16)
    np.testing.assert_array_equal(results['inputs'][:, 0, :, 0, 0].numpy(),
                                  np.tile(SampleFrames(4, 2, 2, test_mode=True).frame_indices(40).reshape(2, 4),
                                          (3, 1)))
    assert results['data_samples'].num_crops == 3 and results['data_samples'].img_shape == (16, 16)


def test_reprs():
    assert repr(FormatShape('NCTHW')) == "FormatShape(input_format='NCTHW')"
    assert repr(PackActionInputs(meta_keys=['filename'])) == "PackActionInputs(meta_keys=('filename',))"
    assert repr(PackFeatureInputs()).startswith('PackFeatureInputs(modalities=None')
