"""LoadSegAnnotations (PIL indices, validation, reduce_zero_label) and PackSegInputs."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch
from PIL import Image

from segmentation.registry import TRANSFORMS
from segmentation.structures import SegDataSample
from segmentation.transforms import LoadSegAnnotations, PackSegInputs


def write_palette_png(path, seg: np.ndarray) -> None:
    im = Image.fromarray(seg.astype(np.uint8), mode='P')
    palette = [0] * 768
    palette[3:12] = [200, 10, 10, 10, 200, 10, 10, 10, 200]  # classes 1..3: red, green, blue
    palette[765:768] = [255, 255, 255]
    im.putpalette(palette)
    im.save(path)


def test_palette_png_read_as_indices_not_colours(tmp_path):
    seg = np.array([[0, 1, 2], [3, 255, 1]], np.uint8)
    path = tmp_path / 'lbl.png'
    write_palette_png(path, seg)
    out = LoadSegAnnotations()({'seg_map_path': str(path), 'num_classes': 4, 'ignore_index': 255})
    assert out['gt_seg_map'].dtype == np.uint8 and np.array_equal(out['gt_seg_map'], seg)
    as_cv2 = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    assert as_cv2.ndim == 3 and not np.array_equal(as_cv2[..., 0], seg)  # cv2 gives the palette colours


def test_bad_values_name_file_values_and_range(tmp_path):
    seg = np.array([[0, 1, 7], [9, 255, 1]], np.uint8)
    path = tmp_path / 'bad_label.png'
    write_palette_png(path, seg)
    with pytest.raises(ValueError) as err:
        LoadSegAnnotations()({'seg_map_path': str(path), 'num_classes': 4, 'ignore_index': 255})
    msg = str(err.value)
    assert 'bad_label.png' in msg and '7, 9' in msg and '0..3' in msg and '255' in msg
    # without num_classes there is nothing to check against
    out = LoadSegAnnotations()({'seg_map_path': str(path)})
    assert out['gt_seg_map'].max() == 255


def test_reduce_zero_label(tmp_path):
    seg = np.array([[0, 1, 2], [3, 255, 1]], np.uint8)
    path = tmp_path / 'z.png'
    write_palette_png(path, seg)
    results = {'seg_map_path': str(path), 'num_classes': 3, 'ignore_index': 255, 'reduce_zero_label': True}
    out = LoadSegAnnotations()(dict(results))
    assert np.array_equal(out['gt_seg_map'], [[255, 0, 1], [2, 255, 0]]) and out['reduce_zero_label'] is True
    # the transform's own setting wins over the dataset's
    out = LoadSegAnnotations(reduce_zero_label=False)({**results, 'num_classes': 4})
    assert np.array_equal(out['gt_seg_map'], seg) and out['reduce_zero_label'] is False
    with pytest.raises(ValueError, match=r'1\.\.2'):  # raw 3 is class 2 of 2 after reduction: too big
        LoadSegAnnotations()({**results, 'num_classes': 2})


def test_colour_and_missing_label_maps_are_rejected(tmp_path):
    rgb = tmp_path / 'rgb.png'
    Image.fromarray(np.zeros((2, 2, 3), np.uint8)).save(rgb)
    with pytest.raises(ValueError, match='rgb.png.*colour'):
        LoadSegAnnotations()({'seg_map_path': str(rgb)})
    with pytest.raises(FileNotFoundError, match='missing.png'):
        LoadSegAnnotations()({'seg_map_path': str(tmp_path / 'missing.png')})
    with pytest.raises(KeyError, match='seg_map_path'):
        LoadSegAnnotations()({'seg_map_path': None})


def test_greyscale_16bit_label_map(tmp_path):
    seg = np.array([[0, 300], [2, 1]], np.uint16)
    path = tmp_path / 'sixteen.png'
    Image.fromarray(seg).save(path)
    out = LoadSegAnnotations()({'seg_map_path': str(path), 'num_classes': 301, 'ignore_index': 255})
    assert out['gt_seg_map'].dtype == np.int32 and np.array_equal(out['gt_seg_map'], seg)


def test_pack_seg_inputs():
    img = np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    seg = np.random.default_rng(1).integers(0, 4, (5, 7)).astype(np.uint8)
    results = {'img': img[:, ::-1], 'gt_seg_map': seg, 'img_path': 'a.png', 'seg_map_path': 'a_l.png',
               'ori_shape': (10, 14), 'img_shape': (5, 7), 'flip': True, 'reduce_zero_label': False, 'other': 1}
    out = TRANSFORMS.build(dict(type='PackSegInputs'))(results)
    inputs, sample = out['inputs'], out['data_samples']
    assert isinstance(sample, SegDataSample)
    assert inputs.dtype == torch.uint8 and inputs.shape == (3, 5, 7) and inputs.is_contiguous()
    assert torch.equal(inputs, torch.from_numpy(img[:, ::-1].copy()).permute(2, 0, 1))
    gt = sample.gt_sem_seg.data
    # 8-bit labels stay uint8 through the workers' shared memory (the model widens them on the device)
    assert gt.dtype == torch.uint8 and gt.shape == (1, 5, 7) and torch.equal(gt[0], torch.from_numpy(seg))
    assert sample.metainfo == {'img_path': 'a.png', 'seg_map_path': 'a_l.png', 'ori_shape': (10, 14),
                               'img_shape': (5, 7), 'flip': True, 'reduce_zero_label': False}
    no_gt = PackSegInputs(meta_keys=('img_shape',))({'img': img, 'img_shape': (5, 7)})['data_samples']
    assert 'gt_sem_seg' not in no_gt and no_gt.metainfo == {'img_shape': (5, 7)}


def test_pack_seg_inputs_keeps_labels_narrow():
    img = np.zeros((2, 3, 3), np.uint8)
    pack = PackSegInputs()
    for values, dtype, expected in [([0, 255], np.int64, torch.uint8), ([0, 300], np.int64, torch.int16),
                                    ([-1, 2], np.int64, torch.int16), ([0, 70000], np.int64, torch.int32),
                                    ([0, 300], np.int32, torch.int32), ([0, 1], bool, torch.uint8)]:
        seg = np.resize(np.array(values, dtype), (2, 3))
        gt = pack({'img': img, 'gt_seg_map': seg})['data_samples'].gt_sem_seg.data
        assert gt.dtype == expected and gt.tolist() == [np.asarray(seg, np.int64).tolist()]
    with pytest.raises(ValueError, match='integer class ids'):
        pack({'img': img, 'gt_seg_map': np.zeros((2, 3), np.float32)})
