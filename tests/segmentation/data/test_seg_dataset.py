"""SegDataset listing, errors and metainfo; VOC/Cityscapes layouts; the dataset base configs."""

from __future__ import annotations

import copy
import os

import cv2
import numpy as np
import pytest
import torch
import yaml
from PIL import Image

from oars_deploy.draw import get_palette
from segmentation.datasets import CityscapesDataset, PascalVOCDataset, SegDataset
from segmentation.registry import DATASETS, METRICS, TRANSFORMS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CONFIG_DIR = os.path.join(ROOT, 'configs', '_base_', 'datasets')


def write_pair(root, rel: str, img_suffix: str = '.png', seg_suffix: str = '.png', size=(8, 10),
               img_dir='images', ann_dir='labels', values=(0, 1, 2, 3), seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    h, w = size
    img_path = os.path.join(root, img_dir, rel + img_suffix)
    os.makedirs(os.path.dirname(img_path), exist_ok=True)
    cv2.imwrite(img_path, rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
    if ann_dir is not None:
        seg_path = os.path.join(root, ann_dir, rel + seg_suffix)
        os.makedirs(os.path.dirname(seg_path), exist_ok=True)
        im = Image.fromarray(rng.choice(np.array(values, np.uint8), size=(h, w)), mode='P')
        im.putpalette(sum(get_palette(256).tolist(), []))
        im.save(seg_path)


def test_lists_sorted_pairs_with_pipeline_keys(tmp_path):
    for name in ['b', 'a', 'c']:
        write_pair(tmp_path, name)
    ds = SegDataset(data_root=str(tmp_path), img_dir='images', ann_dir='labels', img_suffix='.png',
                    classes=['bg', 'x', 'y', 'z'], ignore_index=254, reduce_zero_label=False)
    assert len(ds) == 3
    infos = [ds.get_data_info(i) for i in range(3)]
    assert [os.path.basename(i['img_path']) for i in infos] == ['a.png', 'b.png', 'c.png']
    assert infos[0]['seg_map_path'] == os.path.join(str(tmp_path), 'labels', 'a.png')
    assert infos[0]['num_classes'] == 4 and infos[0]['ignore_index'] == 254
    assert infos[0]['reduce_zero_label'] is False
    assert ds.metainfo['classes'] == ('bg', 'x', 'y', 'z')
    assert ds.metainfo['palette'] == get_palette(4).tolist()


def test_pipeline_from_configs_runs(tmp_path):
    write_pair(tmp_path, 'a', size=(12, 16))
    pipeline = [dict(type='LoadImageFromFile'), dict(type='LoadSegAnnotations'),
                dict(type='RandomCrop', crop_size=(8, 8)), dict(type='PackSegInputs')]
    ds = DATASETS.build(dict(type='SegDataset', data_root=str(tmp_path), img_dir='images', ann_dir='labels',
                             img_suffix='.png', classes=['a', 'b', 'c', 'd'], pipeline=pipeline))
    out = ds[0]
    assert out['inputs'].shape == (3, 8, 8) and out['data_samples'].gt_sem_seg.data.shape == (1, 8, 8)
    assert out['data_samples'].metainfo['ori_shape'] == (12, 16)


def test_bad_label_values_name_the_file(tmp_path):
    write_pair(tmp_path, 'oops', values=(0, 5))
    pipeline = [dict(type='LoadImageFromFile'), dict(type='LoadSegAnnotations'), dict(type='PackSegInputs')]
    ds = SegDataset(data_root=str(tmp_path), img_dir='images', ann_dir='labels', img_suffix='.png',
                    classes=['a', 'b'], pipeline=pipeline, test_mode=True)
    with pytest.raises(ValueError, match=r'oops\.png.*\[5\].*0\.\.1'):
        ds[0]


def test_missing_label_names_both_paths(tmp_path):
    write_pair(tmp_path, 'a')
    write_pair(tmp_path, 'b', ann_dir=None)
    with pytest.raises(FileNotFoundError) as err:
        SegDataset(data_root=str(tmp_path), img_dir='images', ann_dir='labels', img_suffix='.png', classes=['a'])
    msg = str(err.value)
    assert os.path.join('labels', 'b.png') in msg and os.path.join('images', 'b.png') in msg
    # without ann_dir the images alone are listed (inference)
    ds = SegDataset(data_root=str(tmp_path), img_dir='images', img_suffix='.png', classes=['a'])
    assert len(ds) == 2 and ds.get_data_info(1)['seg_map_path'] is None


def test_empty_or_missing_folder_errors(tmp_path):
    (tmp_path / 'images').mkdir()
    (tmp_path / 'images' / 'x.jpg').write_bytes(b'')
    with pytest.raises(FileNotFoundError, match=r"'\.png'.*images"):
        SegDataset(data_root=str(tmp_path), img_dir='images', ann_dir='labels', img_suffix='.png', classes=['a'])
    with pytest.raises(FileNotFoundError, match='nowhere'):
        SegDataset(data_root=str(tmp_path), img_dir='nowhere', classes=['a'])


def test_classes_and_palette_validation(tmp_path):
    write_pair(tmp_path, 'a')
    kw = dict(data_root=str(tmp_path), img_dir='images', ann_dir='labels', img_suffix='.png')
    with pytest.raises(ValueError, match="'classes' is required"):
        SegDataset(**kw)
    with pytest.raises(ValueError, match='2 colours but there are 3 classes'):
        SegDataset(**kw, classes=['a', 'b', 'c'], palette=[[0, 0, 0], [1, 1, 1]])
    with pytest.raises(ValueError, match='duplicate'):
        SegDataset(**kw, classes=['a', 'a'])
    ds = SegDataset(**kw, classes=['a', 'b'], palette=[[1, 2, 3], [4, 5, 6]])
    assert ds.metainfo['palette'] == [[1, 2, 3], [4, 5, 6]]


def test_generated_palette_is_the_voc_colour_map():
    assert get_palette(21).tolist() == PascalVOCDataset.METAINFO['palette']
    palette = get_palette(256).tolist()
    assert len({tuple(c) for c in palette}) == 256


def test_split_file_and_lazy_init(tmp_path):
    for name in ['a', 'b', 'c']:
        write_pair(tmp_path, name)
    (tmp_path / 'train.txt').write_text('c\n\na\n')
    ds = SegDataset(data_root=str(tmp_path), img_dir='images', ann_dir='labels', img_suffix='.png',
                    classes=['a'], split='train.txt', lazy_init=True)
    assert ds._fully_initialized is False
    assert [os.path.basename(ds.get_data_info(i)['img_path']) for i in range(len(ds))] == ['c.png', 'a.png']
    (tmp_path / 'bad.txt').write_text('a\nzzz\n')
    with pytest.raises(FileNotFoundError, match=r'zzz\.png.*bad\.txt'):
        SegDataset(data_root=str(tmp_path), img_dir='images', ann_dir='labels', img_suffix='.png',
                   classes=['a'], split='bad.txt')


def test_voc_layout(tmp_path):
    for name in ['2007_000032', '2007_000039']:
        write_pair(tmp_path, name, img_suffix='.jpg', img_dir='JPEGImages', ann_dir='SegmentationClass',
                   values=(0, 15, 255))
    write_pair(tmp_path, '2008_unlabelled', img_suffix='.jpg', img_dir='JPEGImages', ann_dir=None)
    split = tmp_path / 'ImageSets' / 'Segmentation' / 'train.txt'
    split.parent.mkdir(parents=True)
    split.write_text('2007_000039\n2007_000032\n')
    pipeline = [dict(type='LoadImageFromFile'), dict(type='LoadSegAnnotations'), dict(type='PackSegInputs')]
    ds = PascalVOCDataset(data_root=str(tmp_path), split='ImageSets/Segmentation/train.txt', pipeline=pipeline)
    assert len(ds) == 2 and len(ds.metainfo['classes']) == 21
    assert set(ds[0]['data_samples'].gt_sem_seg.data.unique().tolist()) <= {0, 15, 255}
    with pytest.raises(ValueError, match='split'):
        PascalVOCDataset(data_root=str(tmp_path))


def test_cityscapes_layout(tmp_path):
    for city, frame in [('zurich', '000001_000019'), ('aachen', '000000_000019'), ('aachen', '000001_000019')]:
        write_pair(tmp_path, f'{city}/{city}_{frame}', img_suffix='_leftImg8bit.png',
                   seg_suffix='_gtFine_labelTrainIds.png', img_dir='leftImg8bit/val', ann_dir='gtFine/val',
                   values=(0, 18, 255))
    ds = CityscapesDataset(data_root=str(tmp_path), img_dir='leftImg8bit/val', ann_dir='gtFine/val')
    names = [os.path.relpath(ds.get_data_info(i)['seg_map_path'], str(tmp_path)) for i in range(len(ds))]
    assert names == [os.path.join('gtFine', 'val', 'aachen', 'aachen_000000_000019_gtFine_labelTrainIds.png'),
                     os.path.join('gtFine', 'val', 'aachen', 'aachen_000001_000019_gtFine_labelTrainIds.png'),
                     os.path.join('gtFine', 'val', 'zurich', 'zurich_000001_000019_gtFine_labelTrainIds.png')]
    assert len(ds.metainfo['classes']) == 19 and ds.metainfo['palette'][0] == [128, 64, 128]


@pytest.mark.parametrize('name', ['demo_shapes.yaml', 'pascal_voc12.yaml', 'cityscapes.yaml'])
def test_dataset_config_types_resolve(name):
    with open(os.path.join(CONFIG_DIR, name)) as f:
        cfg = yaml.safe_load(f)
    for split in ['train', 'val', 'test']:
        loader = cfg[f'{split}_dataloader']
        assert {'batch_size', 'num_workers', 'persistent_workers', 'sampler', 'dataset'} <= set(loader)
        # iteration-based schedules (Cityscapes, VOC) train with InfiniteSampler: no epoch restarts
        samplers = ('DefaultSampler', 'InfiniteSampler') if split == 'train' else ('DefaultSampler',)
        assert loader['sampler']['type'] in samplers and loader['sampler']['shuffle'] == (split == 'train')
        assert set(loader['sampler']) == {'type', 'shuffle'}
        assert DATASETS.get(loader['dataset']['type']) is not None
        types = [t['type'] for t in loader['dataset']['pipeline']]
        assert all(TRANSFORMS.get(t) is not None for t in types), types
        assert types[-1] == 'PackSegInputs'
        if split != 'train':  # labels at the original resolution
            assert types.index('LoadSegAnnotations') > types.index('Resize')
    for key in ['val_evaluator', 'test_evaluator']:
        assert cfg[key] == {'type': 'IoUMetric', 'iou_metrics': ['mIoU']} and METRICS.get('IoUMetric')


def test_demo_shapes_config_builds_and_runs(tmp_path):
    with open(os.path.join(CONFIG_DIR, 'demo_shapes.yaml')) as f:
        cfg = yaml.safe_load(f)
    for split in ['train', 'val']:
        for i in range(2):
            write_pair(tmp_path, f'{i:04d}', size=(128, 128), img_dir=f'images/{split}', ann_dir=f'labels/{split}',
                       seed=i)
    np.random.seed(0)
    for key in ['train_dataloader', 'val_dataloader']:
        ds_cfg = copy.deepcopy(cfg[key]['dataset'])
        ds_cfg['data_root'] = str(tmp_path)
        ds = DATASETS.build(ds_cfg)
        assert len(ds) == 2 and ds.metainfo['classes'] == ('background', 'circle', 'square', 'triangle')
        out = ds[1]
        h, w = out['inputs'].shape[1:]
        assert out['inputs'].dtype == torch.uint8 and h <= 128 and w <= 128
        gt = out['data_samples'].gt_sem_seg.data
        assert out['data_samples'].metainfo['ori_shape'] == (128, 128)
        if key == 'train_dataloader':
            assert gt.shape[1:] == (h, w) and max(h, w) <= 64  # augmented together, cropped to <= 64 px
        else:
            assert (h, w) == (64, 64) and gt.shape[1:] == (128, 128)  # label stays at the original size
