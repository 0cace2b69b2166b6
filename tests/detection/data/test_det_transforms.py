"""Detection transforms and the core ones with boxes: after each transform, every box must still bound the
pixels of the rectangle drawn at it (within 1 px), keep its label, and degenerate boxes go with their labels."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import detection.transforms  # noqa: F401  (registers)
from detection.registry import TRANSFORMS
from detection.structures import DetDataSample
from detection.transforms import Expand, FilterAnnotations, LoadAnnotations, PackDetInputs
from drawn_boxes import COLOURS, assert_boxes_bound_drawn, make_results
from oars.data.transforms.albu import MIN_BOX_SIZE, valid_boxes





def check(results: dict, **kwargs) -> None:
    assert results['gt_bboxes'].dtype == np.float32 and results['gt_bboxes_labels'].dtype == np.int64
    assert len(results['gt_bboxes']) == len(results['gt_bboxes_labels']) == len(results['gt_ignore_flags'])
    assert valid_boxes(results['gt_bboxes']).all()
    # Pad keeps img_shape unpadded and sets pad_shape to the image's size
    assert tuple(results.get('pad_shape', results['img_shape'])) == results['img'].shape[:2]
    assert_boxes_bound_drawn(results['img'], results['gt_bboxes'], results['gt_bboxes_labels'], **kwargs)


# ---------------------------------------------------------------------------------------------- loading / packing

def test_load_annotations():
    info = dict(img_path='a.png', instances=[
        dict(bbox=[1, 2, 10, 12], bbox_label=3, ignore_flag=0),
        dict(bbox=[5.5, 6, 20, 30], bbox_label=0, ignore_flag=1),
    ])
    out = LoadAnnotations()(info)
    assert out['gt_bboxes'].dtype == np.float32 and out['gt_bboxes'].shape == (2, 4)
    assert out['gt_bboxes_labels'].dtype == np.int64 and out['gt_bboxes_labels'].tolist() == [3, 0]
    assert out['gt_ignore_flags'].dtype == np.bool_ and out['gt_ignore_flags'].tolist() == [False, True]
    empty = LoadAnnotations()(dict(img_path='b.png', instances=[]))
    assert empty['gt_bboxes'].shape == (0, 4) and empty['gt_bboxes'].dtype == np.float32
    assert empty['gt_bboxes_labels'].shape == (0,) and empty['gt_ignore_flags'].shape == (0,)
    with pytest.raises(KeyError, match="results\\['instances'\\]"):
        LoadAnnotations()(dict(img_path='c.png'))
    with pytest.raises(ValueError, match="c.png.*'bbox'"):
        LoadAnnotations()(dict(img_path='c.png', instances=[dict(bbox=[1, 2, 3], bbox_label=0)]))


def test_pack_det_inputs_types_and_split():
    r = make_results(ignore=[False, True, False])
    r.update(scale_factor=(1.0, 1.0), flip=False, flip_direction=None)
    img = r['img'].copy()
    out = TRANSFORMS.build(dict(type='PackDetInputs'))(r)
    x, sample = out['inputs'], out['data_samples']
    assert isinstance(sample, DetDataSample)
    assert x.dtype == torch.uint8 and x.shape == (3, 64, 64) and x.is_contiguous()
    assert torch.equal(x, torch.from_numpy(img).permute(2, 0, 1))
    gt, ign = sample.gt_instances, sample.ignored_instances
    assert gt.bboxes.dtype == torch.float32 and gt.labels.dtype == torch.int64
    assert gt.labels.tolist() == [0, 2] and ign.labels.tolist() == [1]
    assert torch.equal(ign.bboxes, torch.tensor([[36.0, 6, 58, 20]]))
    assert sample.img_shape == (64, 64) and sample.img_id == 1 and sample.scale_factor == (1.0, 1.0)
    assert sample.flip is False and 'pad_shape' not in sample.metainfo
    # no boxes (inference): no gt fields; empty boxes: empty [0, 4] tensors
    test = PackDetInputs()(dict(img=img, img_shape=(64, 64)))['data_samples']
    assert 'gt_instances' not in test
    empty = PackDetInputs()(make_results(boxes=np.zeros((0, 4)), labels=[]))['data_samples']
    assert empty.gt_instances.bboxes.shape == (0, 4) and empty.ignored_instances.labels.shape == (0,)


def test_filter_annotations_drops_boxes_with_labels_and_flags():
    r = make_results(boxes=[[0, 0, 10, 10], [5, 5, 5.5, 20], [3, 3, 30, 3.9], [10, 10, 12, 12]],
                     labels=[0, 1, 2, 3], ignore=[0, 1, 0, 1])
    out = FilterAnnotations(min_gt_bbox_wh=(1, 1))(r)
    assert out['gt_bboxes_labels'].tolist() == [0, 3] and out['gt_ignore_flags'].tolist() == [False, True]
    assert FilterAnnotations(min_gt_bbox_wh=(4, 4))(make_results(boxes=[[0, 0, 3, 3]], labels=[0]))[
        'gt_bboxes'].shape == (0, 4)
    assert FilterAnnotations(min_gt_bbox_wh=(4, 4), keep_empty=False)(
        make_results(boxes=[[0, 0, 3, 3]], labels=[0])) is None


# ------------------------------------------------------------------------------------- core transforms with boxes

@pytest.mark.parametrize('cfg', [
    dict(type='Resize', scale=(100, 40), keep_ratio=True),
    dict(type='Resize', scale=(48, 96), keep_ratio=False),
    dict(type='RandomResize', scale=(64, 64), ratio_range=(0.5, 1.5), keep_ratio=True),
    dict(type='RandomFlip', prob=1.0),
    dict(type='RandomFlip', prob=1.0, direction='vertical'),
    dict(type='RandomCrop', crop_size=(40, 44)),
    dict(type='Pad', size=(80, 72)),
    dict(type='Pad', size_divisor=48),
])
def test_core_transforms_move_boxes(cfg):
    np.random.seed(3)
    for _ in range(4):
        r = make_results()
        out = TRANSFORMS.build(cfg)(r)
        check(out)


def test_resize_scale_factor_and_letterbox():
    r = make_results(h=64, w=32, boxes=[[4, 8, 20, 40]], labels=[0])
    r = TRANSFORMS.build(dict(type='Resize', scale=(80, 80), keep_ratio=True))(r)
    assert r['img'].shape[:2] == (80, 40) and r['scale_factor'] == (1.25, 1.25)
    np.testing.assert_allclose(r['gt_bboxes'], [[5, 10, 25, 50]], atol=1e-3)
    r = TRANSFORMS.build(dict(type='Pad', size=(80, 80), pad_val=114))(r)  # letterbox: pad bottom/right
    assert r['img'].shape[:2] == (80, 80) and r['pad_shape'] == (80, 80) and r['img_shape'] == (80, 40)
    assert (r['img'][:, 40:] == 114).all()
    np.testing.assert_allclose(r['gt_bboxes'], [[5, 10, 25, 50]], atol=1e-3)


def test_core_crop_drops_degenerate_boxes_with_labels():
    r = make_results(h=48, w=40, boxes=[[2, 2, 12, 12], [10, 39.5, 30, 47], [20, 20, 30, 30]], labels=[0, 1, 2],
                     ignore=[0, 1, 0])
    np.random.seed(11)  # RandomCrop draws y1 = 0: the window is rows 0..40
    out = TRANSFORMS.build(dict(type='RandomCrop', crop_size=(40, 40)))(r)
    assert out['img'].shape[:2] == (40, 40)
    # box 1 keeps rows 39.5..40 (0.5 px): dropped with its label and ignore flag
    assert out['gt_bboxes_labels'].tolist() == [0, 2] and out['gt_ignore_flags'].tolist() == [False, False]
    check(out, tol=0.0)


def test_albu_drops_sub_pixel_boxes_after_resize():
    r = make_results(boxes=[[10, 10, 11.5, 30], [20, 20, 40, 40]], labels=[0, 1], ignore=[1, 0])
    out = TRANSFORMS.build(dict(type='Resize', scale=(32, 32), keep_ratio=False))(r)
    # the first box is 0.75 px wide after halving: dropped, with its label and ignore flag
    assert out['gt_bboxes_labels'].tolist() == [1] and out['gt_ignore_flags'].tolist() == [False]
    np.testing.assert_allclose(out['gt_bboxes'], [[10, 10, 20, 20]], atol=1e-3)
    assert MIN_BOX_SIZE == 1.0


@pytest.mark.parametrize('albu', [
    [dict(type='HorizontalFlip', p=1.0)],
    [dict(type='RandomSizedBBoxSafeCrop', height=48, width=48, p=1.0)],
    [dict(type='Affine', scale=0.8, translate_px=4, p=1.0)],
    [dict(type='ColorJitter', brightness=0.0, contrast=0.0, saturation=0.5, hue=0.0, p=1.0),
     dict(type='VerticalFlip', p=1.0)],
])
def test_albu_transforms_keep_boxes_consistent(albu):
    np.random.seed(1)
    for _ in range(3):
        out = TRANSFORMS.build(dict(type='Albu', transforms=albu))(make_results())
        check(out, tol=1.5)
        assert len(out['gt_bboxes']) >= 1


# ---------------------------------------------------------------------------------------- Expand / MinIoU crop

def test_expand_shifts_boxes():
    np.random.seed(0)
    t = Expand(mean=(0, 0, 0), ratio_range=(1.5, 3), prob=1.0)
    for _ in range(5):
        r = make_results()
        out = t(r)
        h, w = out['img'].shape[:2]
        assert 96 <= h <= 192 and 96 <= w <= 192
        check(out, tol=0.0)
    np.testing.assert_array_equal(Expand(prob=0.0)(make_results())['img'], make_results()['img'])
    out = Expand(mean=(114, 114, 114), ratio_range=(2, 2), prob=1.0)(make_results())
    assert out['img'].shape[:2] == (128, 128) and (out['img'] == 114).mean() > 0.7


def test_min_iou_random_crop():
    np.random.seed(0)
    t = TRANSFORMS.build(dict(type='MinIoURandomCrop', min_ious=(0.1, 0.3, 0.5), min_crop_size=0.3))
    cropped = 0
    for _ in range(30):
        r = make_results(ignore=[False, True, False])
        out = t(r)
        check(out, tol=0.0)  # integer crops: exact
        cropped += out['img'].shape[:2] != (64, 64)
        # labels and flags travelled together: label 1 is the ignored one
        assert (out['gt_ignore_flags'] == (out['gt_bboxes_labels'] == 1)).all()
        assert len(out['gt_bboxes']) >= 1
    assert cropped > 10
    empty = make_results(boxes=np.zeros((0, 4)), labels=[])
    assert t(empty)['img'].shape == (64, 64, 3)
