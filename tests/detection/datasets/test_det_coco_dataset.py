"""CocoDataset: loading, xywh->xyxy, crowd/RLE/polygons, class filter by name, bad annotations, metainfo."""

from __future__ import annotations

import json
import os
import warnings

import cv2
import numpy as np
import pytest
from PIL import Image

from detection.datasets import COCO_CLASSES, BadAnnotationWarning, CocoDataset
from detection.registry import DATASETS
from oars.data.dataset import BadSampleWarning
from oars.errors import DataError, DataFileNotFoundError
from oars_deploy.draw import get_palette

CATEGORIES = [{'id': 3, 'name': 'cat'}, {'id': 7, 'name': 'dog'}, {'id': 9, 'name': 'bird'}]


def write_image(path, h: int = 48, w: int = 64) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    cv2.imwrite(str(path), np.full((h, w, 3), 127, np.uint8))


def write_coco(root, images, annotations, categories=CATEGORIES, name='ann.json', skip_files=()) -> str:
    for img in images:
        if img['file_name'] not in skip_files:
            write_image(os.path.join(root, 'images', 'train', img['file_name']), img.get('height', 48),
                        img.get('width', 64))
    ann_file = os.path.join(root, 'annotations', name)
    os.makedirs(os.path.dirname(ann_file), exist_ok=True)
    with open(ann_file, 'w') as f:
        json.dump({'images': images, 'annotations': annotations, 'categories': categories}, f)
    return ann_file


def ann(aid, image_id, cat, bbox, **kw):
    return dict(id=aid, image_id=image_id, category_id=cat, bbox=bbox, area=1.0, iscrowd=0, **kw)


def basic(tmp_path) -> str:
    images = [{'id': 1, 'file_name': 'a.png', 'height': 48, 'width': 64},
              {'id': 2, 'file_name': 'b.png', 'height': 48, 'width': 64}]
    annotations = [
        ann(10, 1, 7, [10, 5, 20, 10], segmentation=[[10, 5, 30, 5, 30, 15]]),
        ann(11, 1, 3, [0, 0, 8, 8], segmentation={'counts': 'abc', 'size': [48, 64]}),  # RLE: kept as it is
        ann(12, 1, 9, [1, 1, 5, 5]),  # bird is not in classes: dropped silently
        ann(13, 2, 3, [50, 40, 30, 30]),  # partly outside: clipped to 64x48
        dict(ann(14, 2, 7, [2, 2, 4, 4]), iscrowd=1),
    ]
    return write_coco(tmp_path, images, annotations)


def infos(ds) -> list[dict]:
    return [ds.get_data_info(i) for i in range(len(ds))]


def load(tmp_path, **kw):
    kw.setdefault('classes', ['dog', 'cat'])
    return CocoDataset(data_root=str(tmp_path), ann_file='annotations/ann.json', **kw)


def test_loads_boxes_labels_crowd_and_masks(tmp_path):
    ann_file = basic(tmp_path)
    ds = load(tmp_path)
    assert len(ds) == 2
    a, b = ds.get_data_info(0), ds.get_data_info(1)
    assert a['img_path'] == os.path.join(str(tmp_path), 'images', 'train', 'a.png')
    assert (a['img_id'], a['height'], a['width']) == (1, 48, 64)
    assert [i['bbox'] for i in a['instances']] == [[10.0, 5.0, 30.0, 15.0], [0.0, 0.0, 8.0, 8.0]]
    assert [i['bbox_label'] for i in a['instances']] == [0, 1]  # dog, cat: order of `classes`, not of ids
    assert a['instances'][0]['mask'] == [[10.0, 5.0, 30.0, 5.0, 30.0, 15.0]]
    assert a['instances'][1]['mask'] == {'counts': 'abc', 'size': [48, 64]}
    assert [i['ann_id'] for i in a['instances']] == [10, 11]
    assert [i['ignore_flag'] for i in a['instances']] == [0, 0]
    assert b['instances'][0]['bbox'] == [50.0, 40.0, 64.0, 48.0]
    assert b['instances'][1]['ignore_flag'] == 1 and b['instances'][1]['bbox_label'] == 0
    assert ds.get_cat_ids(1) == [1, 0]
    meta = ds.metainfo
    assert meta['classes'] == ('dog', 'cat') and meta['cat_ids'] == [7, 3]
    assert meta['palette'] == get_palette(2).tolist()
    assert meta['ann_file'] == os.path.abspath(ann_file)


def test_pipeline_and_registry_build(tmp_path):
    basic(tmp_path)
    ds = DATASETS.build(dict(type='CocoDataset', data_root=str(tmp_path), ann_file='annotations/ann.json',
                             classes=['dog', 'cat'], pipeline=[lambda r: dict(r, seen=True)]))
    assert isinstance(ds, CocoDataset) and ds[0]['seen'] and ds[0]['img_id'] == 1


def test_lazy_init_has_classes_without_reading(tmp_path):
    ds = CocoDataset(data_root=str(tmp_path), ann_file='missing.json', lazy_init=True)
    assert ds.metainfo['classes'] == COCO_CLASSES and len(COCO_CLASSES) == 80
    assert len(ds.metainfo['palette']) == 80
    assert ds.metainfo['ann_file'] == os.path.join(str(tmp_path), 'missing.json')
    with pytest.raises(DataFileNotFoundError, match='missing.json'):
        ds.full_init()


def test_class_missing_from_file_names_file_and_choices(tmp_path):
    basic(tmp_path)
    with pytest.raises(DataError) as err:
        load(tmp_path, classes=['dog', 'horse'])
    msg = str(err.value)
    assert 'ann.json' in msg and "'horse'" in msg and "['bird', 'cat', 'dog']" in msg


@pytest.mark.parametrize('content,expect', [
    ('{"images": [', 'cannot read COCO'),
    ('[1, 2]', 'holds a JSON list of 2 items, not an object'),  # was pycocotools' "format <class 'list'> not supported"
    ('{"annotations": []}', "no 'images' list"),
    ('{"images": [], "annotations": []}', "no 'categories' list.*keys \\['annotations', 'images'\\]"),
    ('{"images": [], "categories": []}', "no 'annotations' list .*test_mode: true"),  # trained on nothing before
    ('{"images": [], "annotations": {}, "categories": []}', "'annotations' is a dict; expected a list"),
    ('{"images": [], "annotations": [{"id": 1, "bbox": [0, 0, 1, 1]}], "categories": []}',
     r"annotations\[0\] has no \['image_id', 'category_id'\]"),  # was KeyError: 'image_id'
])
def test_unparsable_ann_file(tmp_path, content, expect):
    os.makedirs(tmp_path / 'annotations')
    (tmp_path / 'annotations' / 'ann.json').write_text(content)
    with pytest.raises(DataError, match=expect) as err:
        load(tmp_path)
    assert 'ann.json' in str(err.value)


def test_image_entries_only_file_is_a_test_set(tmp_path):
    os.makedirs(tmp_path / 'annotations')
    images = [{'id': 1, 'file_name': 'a.png', 'width': 4, 'height': 4}]
    (tmp_path / 'annotations' / 'ann.json').write_text(json.dumps({'images': images, 'categories': CATEGORIES[:1]}))
    os.makedirs(tmp_path / 'images' / 'train')
    (tmp_path / 'images' / 'train' / 'a.png').write_bytes(b'')
    ds = load(tmp_path, classes=['cat'], test_mode=True)
    assert len(ds) == 1 and ds.get_data_info(0)['instances'] == []
    with pytest.raises(DataError, match="no 'annotations' list"):  # training on it would learn background only
        load(tmp_path, classes=['cat'], filter_empty_gt=False)


PIPELINE = [dict(type='LoadImageFromFile'), dict(type='LoadAnnotations')]


def test_annotated_size_must_be_the_image_size(tmp_path):
    basic(tmp_path)
    write_image(tmp_path / 'images' / 'train' / 'b.png', h=64, w=48)  # the json says 64x48 (WxH)
    ds = load(tmp_path, pipeline=PIPELINE)
    assert ds[0]['gt_bboxes'].shape == (2, 4)  # a.png: the dog and the crowd box
    with pytest.raises(DataError) as err:  # before: boxes checked and clipped against 64x48, trained silently
        ds[1]
    msg = str(err.value)
    for part in ('b.png', 'is 48x64 (WxH)', 'width 64, height 48', 'fix width/height', 'tools/check_data.py'):
        assert part in msg, msg


def test_annotated_size_names_a_rotating_exif_tag(tmp_path):
    basic(tmp_path)
    path = tmp_path / 'images' / 'train' / 'b.png'
    exif = Image.Exif()
    exif[0x0112] = 6  # phone photo: stored 64x48, shown (and read) 48x64
    Image.fromarray(np.zeros((48, 64, 3), np.uint8)).save(path, exif=exif)
    with pytest.raises(DataError, match='EXIF orientation 6'):
        load(tmp_path, pipeline=PIPELINE)[1]


def test_size_mismatch_is_skipped_with_on_bad_sample_skip(tmp_path):
    basic(tmp_path)
    write_image(tmp_path / 'images' / 'train' / 'b.png', h=64, w=48)
    ds = load(tmp_path, pipeline=PIPELINE, on_bad_sample='skip')
    with pytest.warns(BadSampleWarning, match=r'skipped .*b\.png: image .*b\.png is 48x64'):
        sample = ds[1]
    assert sample['img_path'].endswith('a.png')  # the only good sample stands in, loudly
    assert list(ds.skipped) == [str(tmp_path / 'images' / 'train' / 'b.png')]


def test_bad_arguments(tmp_path):
    basic(tmp_path)
    with pytest.raises(DataError, match="on_bad_annotation must be one of"):
        load(tmp_path, on_bad_annotation='ignore')
    with pytest.raises(DataError, match='duplicate class names'):
        load(tmp_path, classes=['dog', 'dog'])
    with pytest.raises(DataError, match='palette'):
        load(tmp_path, palette=[[0, 0, 0]])


BAD = [
    ('non-positive box size', [5, 5, 0, 4], '0'),
    ('non-positive box size', [5, 5, 4, -2], '-2'),
    ('box outside image', [70, 10, 5, 5], '70'),
    ('malformed box', [1, 2, 3], '[1, 2, 3]'),
]


@pytest.mark.parametrize('kind,bbox,value', BAD)
def test_bad_box_fails_with_details(tmp_path, kind, bbox, value):
    images = [{'id': 1, 'file_name': 'a.png', 'height': 48, 'width': 64}]
    write_coco(tmp_path, images, [ann(10, 1, 7, [1, 1, 4, 4]), ann(42, 1, 7, bbox)])
    with pytest.raises(DataError) as err:
        load(tmp_path)
    msg = str(err.value)
    for part in ('ann.json', 'annotation id 42', 'a.png', value, kind, 'on_bad_annotation: skip', 'expected'):
        assert part in msg, (part, msg)


def test_unknown_category_id_fails(tmp_path):
    images = [{'id': 1, 'file_name': 'a.png', 'height': 48, 'width': 64}]
    write_coco(tmp_path, images, [ann(5, 1, 99, [1, 1, 4, 4])])
    with pytest.raises(DataError) as err:
        load(tmp_path)
    msg = str(err.value)
    assert 'annotation id 5' in msg and 'category_id 99' in msg and '[3, 7, 9]' in msg and 'ann.json' in msg


def test_missing_image_fails(tmp_path):
    images = [{'id': 1, 'file_name': 'a.png', 'height': 48, 'width': 64},
              {'id': 2, 'file_name': 'gone.png', 'height': 48, 'width': 64}]
    write_coco(tmp_path, images, [ann(1, 1, 7, [1, 1, 4, 4])], skip_files=['gone.png'])
    with pytest.raises(DataFileNotFoundError) as err:
        load(tmp_path)
    assert 'gone.png' in str(err.value) and 'ann.json' in str(err.value) and 'on_bad_annotation: skip' in str(err.value)


def test_skip_drops_bad_annotations_with_one_counted_warning(tmp_path):
    images = [{'id': 1, 'file_name': 'a.png', 'height': 48, 'width': 64},
              {'id': 2, 'file_name': 'gone.png', 'height': 48, 'width': 64},
              {'id': 3, 'file_name': 'c.png', 'height': 48, 'width': 64}]
    annotations = [ann(1, 1, 7, [1, 1, 4, 4]), ann(2, 1, 7, [5, 5, 0, 4]), ann(3, 1, 7, [5, 5, 4, -1]),
                   ann(4, 1, 99, [1, 1, 4, 4]), ann(5, 2, 3, [1, 1, 4, 4]), ann(6, 3, 3, [100, 100, 4, 4]),
                   ann(7, 3, 3, [2, 2, 4, 4]), ann(8, 77, 3, [2, 2, 4, 4])]
    write_coco(tmp_path, images, annotations, skip_files=['gone.png'])
    with pytest.warns(BadAnnotationWarning) as rec:
        ds = load(tmp_path, on_bad_annotation='skip')
    assert len(rec) == 1
    msg = str(rec[0].message)
    for part in ('skipped 6 bad annotation(s)', 'ann.json', 'non-positive box size: 2', 'unknown category id: 1',
                 'missing image: 1', 'box outside image: 1', 'unknown image id: 1', 'annotation id 2'):
        assert part in msg, (part, msg)
    assert [d['img_id'] for d in infos(ds)] == [1, 3]
    assert [[i['bbox'] for i in d['instances']] for d in infos(ds)] == [[[1, 1, 5, 5]], [[2, 2, 6, 6]]]


def test_clean_file_gives_no_warning(tmp_path):
    basic(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter('error', BadAnnotationWarning)
        load(tmp_path, on_bad_annotation='skip')


def test_filter_empty_gt(tmp_path):
    images = [{'id': i, 'file_name': f'{i}.png', 'height': 48, 'width': 64} for i in (1, 2, 3, 4)]
    annotations = [ann(1, 1, 7, [1, 1, 4, 4]), dict(ann(2, 2, 7, [1, 1, 4, 4]), iscrowd=1),
                   ann(3, 4, 9, [1, 1, 4, 4])]  # image 3: nothing; image 4: only a filtered-out class
    write_coco(tmp_path, images, annotations)
    assert [d['img_id'] for d in infos(load(tmp_path))] == [1]
    assert len(load(tmp_path, filter_empty_gt=False)) == 4
    assert len(load(tmp_path, test_mode=True)) == 4


def test_missing_size_is_read_from_image(tmp_path):
    write_coco(tmp_path, [{'id': 1, 'file_name': 'a.png'}], [ann(1, 1, 7, [1, 1, 70, 4])])
    write_image(tmp_path / 'images' / 'train' / 'a.png', 20, 30)
    info = load(tmp_path).get_data_info(0)
    assert (info['height'], info['width']) == (20, 30) and info['instances'][0]['bbox'] == [1, 1, 30, 5]


def test_demo_shapes_load(tmp_path):
    from oars.data.demo_shapes import generate

    generate(str(tmp_path), num_train=4, num_val=2, size=128, seed=0)
    classes = ['circle', 'square', 'triangle']
    ds = CocoDataset(data_root=str(tmp_path), ann_file='annotations/instances_train.json', classes=classes)
    val = CocoDataset(data_root=str(tmp_path), ann_file='annotations/instances_val.json',
                      data_prefix={'img': 'images/val'}, classes=classes, test_mode=True)
    assert len(ds) == 4 and len(val) == 2 and ds.metainfo['cat_ids'] == [1, 2, 3]
    raw = json.loads((tmp_path / 'annotations' / 'instances_train.json').read_text())
    first = [a for a in raw['annotations'] if a['image_id'] == 1]
    info = ds.get_data_info(0)
    assert len(info['instances']) == len(first)
    for inst, a in zip(info['instances'], first):
        x, y, w, h = a['bbox']
        assert inst['bbox'] == [x, y, x + w, y + h] and inst['bbox_label'] == a['category_id'] - 1
        assert inst['mask'] == a['segmentation'] and inst['ignore_flag'] == 0
    assert os.path.isfile(info['img_path'])


def test_nothing_left_is_a_clear_error(tmp_path):
    write_coco(tmp_path, [{'id': 1, 'file_name': 'a.png', 'height': 48, 'width': 64}], [ann(1, 1, 9, [1, 1, 4, 4])])
    with pytest.raises(DataError, match='no images to use from .*ann.json.*1 image'):
        load(tmp_path)


def test_subclass_metainfo_palette_is_the_default(tmp_path):
    class Shapes(CocoDataset):
        METAINFO = {'classes': ('dog', 'cat'), 'palette': [[1, 2, 3], [4, 5, 6]]}

    basic(tmp_path)
    ds = Shapes(data_root=str(tmp_path), ann_file='annotations/ann.json', lazy_init=True)
    assert ds.metainfo['palette'] == [[1, 2, 3], [4, 5, 6]]
    other = Shapes(data_root=str(tmp_path), ann_file='annotations/ann.json', classes=['cat'], lazy_init=True)
    assert other.metainfo['palette'] == get_palette(1).tolist()
