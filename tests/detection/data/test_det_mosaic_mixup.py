"""Mosaic, MixUp and MultiImageMixDataset: boxes still bound the rectangles drawn at them (within 1 px) after
mixing, degenerate boxes go with their labels and flags, and the wrapper hands the extra samples over."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from mmengine.dataset import BaseDataset, pseudo_collate

import detection.transforms  # noqa: F401  (registers)
from detection.datasets.multi_image_mix import MultiImageMixDataset
from detection.models.data_preprocessor import DetDataPreprocessor
from detection.registry import DATASETS, TRANSFORMS
from detection.transforms import MixUp, Mosaic
from drawn_boxes import COLOURS, assert_boxes_bound_drawn, make_results
from oars.data.transforms.albu import valid_boxes
from oars.errors import DataError





def four_samples() -> list[dict]:
    """Images of different sizes, one box per image, boxes at least 6 px from the image edges."""
    return [
        make_results(64, 64, [[10, 12, 40, 50]], [0]),
        make_results(48, 80, [[8, 6, 50, 30], [60, 20, 72, 40]], [1, 4]),
        make_results(80, 40, [[6, 10, 30, 70]], [2]),
        make_results(32, 32, [[6, 8, 20, 24]], [3]),
    ]


def mosaic_input() -> dict:
    samples = four_samples()
    results = samples[0]
    results['mix_results'] = samples[1:]
    return results


def test_mosaic_boxes_follow_the_pixels():
    t = Mosaic(img_scale=(64, 64), center_ratio_range=(0.5, 1.5), pad_val=0)
    np.random.seed(0)
    for _ in range(10):
        out = t(mosaic_input())
        assert out['img'].shape == (128, 128, 3) and out['img_shape'] == (128, 128)
        assert out['gt_bboxes'].dtype == np.float32 and valid_boxes(out['gt_bboxes']).all()
        assert len(out['gt_bboxes']) == len(out['gt_bboxes_labels']) == len(out['gt_ignore_flags'])
        assert_boxes_bound_drawn(out['img'], out['gt_bboxes'], out['gt_bboxes_labels'])


def test_mosaic_centred_keeps_all_and_clipped_drops_with_labels():
    out = Mosaic(img_scale=(64, 64), center_ratio_range=(1.0, 1.0), pad_val=0)(mosaic_input())
    assert sorted(out['gt_bboxes_labels'].tolist()) == [0, 1, 2, 3, 4]
    # first image placed with its bottom-right corner at the centre (64, 64): boxes shifted by 0
    np.testing.assert_allclose(out['gt_bboxes'][0], [10, 12, 40, 50])
    assert (out['img'][0:64, 0:64] == four_samples()[0]['img']).all()
    # centre at (32, 32): the first image is shifted by (-32, -32); box 1 keeps 0.6 px -> dropped with its flag
    first = make_results(64, 64, [[30, 40, 32.6, 50], [20, 40, 40, 50]], [0, 1], ignore=[1, 0])
    first['mix_results'] = four_samples()[1:]
    out = Mosaic(img_scale=(64, 64), center_ratio_range=(0.5, 0.5), pad_val=0)(first)
    assert out['gt_bboxes_labels'][:1].tolist() == [1] and not out['gt_ignore_flags'][0]
    np.testing.assert_allclose(out['gt_bboxes'][0], [0, 8, 8, 18])
    assert 0 not in out['gt_bboxes_labels'].tolist()


def test_mosaic_prob_pad_and_errors():
    r = mosaic_input()
    img = r['img'].copy()
    assert Mosaic(prob=0.0)(r)['img'] is r['img'] and (r['img'] == img).all()
    out = Mosaic(img_scale=(64, 64), center_ratio_range=(0.5, 0.5), pad_val=114)(mosaic_input())
    assert (out['img'][100:, 100:] == 114).all()  # beyond every quadrant's image
    with pytest.raises(DataError, match='MultiImageMixDataset'):
        Mosaic()(four_samples()[0])
    assert len(Mosaic().get_indexes(list(range(5)))) == 3 and len(MixUp().get_indexes(list(range(5)))) == 1


def mixup_input(channel_other: int = 2) -> dict:
    ori = make_results(64, 64, [[10, 12, 30, 40], [40, 36, 58, 60]], [0, 1], channel=0, ignore=[0, 1])
    other = make_results(48, 80, [[8, 6, 40, 30], [50, 16, 72, 42]], [2, 3], channel=channel_other, ignore=[1, 0])
    ori['mix_results'] = [other]
    return ori


def test_mixup_boxes_follow_the_pixels():
    t = MixUp(img_scale=(64, 64), ratio_range=(0.6, 1.4), flip_ratio=0.5, pad_val=0)
    np.random.seed(0)
    n_other = []
    for _ in range(12):
        out = t(mixup_input())
        assert out['img'].shape == (64, 64, 3) and out['img'].dtype == np.uint8
        boxes, labels, flags = out['gt_bboxes'], out['gt_bboxes_labels'], out['gt_ignore_flags']
        assert valid_boxes(boxes).all() and len(boxes) == len(labels) == len(flags)
        # this sample's boxes come first, unchanged, blended at half intensity (channel 0)
        np.testing.assert_array_equal(boxes[:2], [[10, 12, 30, 40], [40, 36, 58, 60]])
        assert labels[:2].tolist() == [0, 1] and flags[:2].tolist() == [False, True]
        assert_boxes_bound_drawn(out['img'], boxes[:2], labels[:2], channel=0, gain=0.5)
        # the partner's boxes (channel 2): flags travel with labels (2 ignored, 3 not)
        assert (flags[2:] == (labels[2:] == 2)).all()
        assert_boxes_bound_drawn(out['img'], boxes[2:], labels[2:], channel=2, gain=0.5)
        n_other.append(len(boxes) - 2)
    assert max(n_other) == 2


def test_mixup_skips():
    r = mixup_input()
    img = r['img'].copy()
    assert (MixUp(prob=0.0)(r)['img'] == img).all()
    r = mixup_input()
    r['mix_results'][0] = make_results(48, 80, np.zeros((0, 4)), [])
    out = MixUp()(r)
    assert (out['img'] == img).all() and len(out['gt_bboxes']) == 2


# ------------------------------------------------------------------------------------------- MultiImageMixDataset

@DATASETS.register_module()
class _DetToyMixDataset(BaseDataset):
    """Images in memory: data_info carries 'img' and 'instances'; the pipeline loads the boxes."""

    METAINFO = dict(classes=('a', 'b', 'c', 'd', 'e'))

    def __init__(self, pipeline=(), **kwargs) -> None:
        # built with the task's registry, as the task's datasets do (mmengine's Compose would use the root one)
        super().__init__(pipeline=[TRANSFORMS.build(t) for t in pipeline], **kwargs)

    def load_data_list(self) -> list[dict]:
        infos = []
        for i, s in enumerate(four_samples()):
            instances = [dict(bbox=b.tolist(), bbox_label=int(lab), ignore_flag=0)
                         for b, lab in zip(s['gt_bboxes'], s['gt_bboxes_labels'])]
            infos.append(dict(img=s['img'], img_id=i, img_shape=s['img_shape'], instances=instances))
        return infos


def toy_cfg(**kwargs) -> dict:
    return dict(type='_DetToyMixDataset', pipeline=[dict(type='LoadAnnotations')], serialize_data=False, **kwargs)


def test_multi_image_mix_dataset():
    ds = MultiImageMixDataset(
        dataset=toy_cfg(),
        pipeline=[dict(type='Mosaic', img_scale=(32, 32), pad_val=0), dict(type='MixUp', img_scale=(32, 32), pad_val=0),
                  dict(type='RandomFlip', prob=1.0), dict(type='Resize', scale=(48, 48)), dict(type='PackDetInputs')])
    assert len(ds) == 4 and ds.metainfo['classes'] == ('a', 'b', 'c', 'd', 'e')
    np.random.seed(0)
    out = ds[1]
    assert out['inputs'].shape == (3, 48, 48) and out['data_samples'].flip
    assert 'mix_results' not in out and len(out['data_samples'].gt_instances) >= 1
    boxes = out['data_samples'].gt_instances.bboxes
    assert boxes.dtype == torch.float32 and (boxes >= 0).all() and (boxes <= 48).all()
    # ... and the detector's preprocessor batches it
    batch = pseudo_collate([out, ds[0]])
    pre = DetDataPreprocessor(mean=[0, 0, 0], std=[1, 1, 1], pad_size_divisor=32,
                              batch_augments=[dict(type='BatchRandomResize', sizes=[32])])
    x = pre(batch, training=True)
    assert x['inputs'].shape == (2, 3, 32, 32)
    torch.testing.assert_close(x['data_samples'][0].gt_instances.bboxes, boxes * 0.5)
    # skipping the mixing transforms gives the inner sample, packed
    ds.update_skip_type_keys(['Mosaic', 'MixUp'])
    assert ds[2]['inputs'].shape == (3, 48, 24)  # the 80x40 inner sample, only resized
    with pytest.raises(DataError, match='name no transform'):
        ds.update_skip_type_keys(['Mosiac'])


def test_multi_image_mix_dataset_lazy_and_refetch():
    ds = MultiImageMixDataset(dataset=toy_cfg(lazy_init=True), pipeline=[dict(type='Mosaic', img_scale=(32, 32))])
    assert not ds.dataset._fully_initialized and ds.metainfo['classes'][0] == 'a'
    ds.full_init()
    assert ds.dataset._fully_initialized and len(ds) == 4
    # a transform that always returns None is retried max_refetch times, then a clear error
    calls = []

    def never(results):
        calls.append(1)
        return None

    ds = MultiImageMixDataset(dataset=ds.dataset, pipeline=[never], max_refetch=3)
    with pytest.raises(DataError, match='returned None 3 times'):
        ds[0]
    assert len(calls) == 3
    with pytest.raises(TypeError, match='dataset config dict'):
        MultiImageMixDataset(dataset=5, pipeline=[])
