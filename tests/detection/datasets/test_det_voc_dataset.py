"""VOCDataset: 1-based box conversion, difficult -> ignore, unknown names, bad XML/boxes, missing files."""

from __future__ import annotations

import os

import cv2
import numpy as np
import pytest

from detection.datasets import VOC_CLASSES, BadAnnotationWarning, VOCDataset
from detection.registry import DATASETS
from oars.errors import DataError, DataFileNotFoundError


def obj(name, box, difficult=0):
    xmin, ymin, xmax, ymax = box
    return (f'<object><name>{name}</name><difficult>{difficult}</difficult><bndbox><xmin>{xmin}</xmin>'
            f'<ymin>{ymin}</ymin><xmax>{xmax}</xmax><ymax>{ymax}</ymax></bndbox></object>')


def write_voc(root, items: dict, split='train', size=True, h=48, w=64, no_image=()) -> None:
    """``items``: image id -> list of object XML snippets (or a raw XML string)."""
    for sub in ('JPEGImages', 'Annotations', 'ImageSets/Main'):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
    for img_id, objects in items.items():
        if img_id not in no_image:
            cv2.imwrite(os.path.join(root, 'JPEGImages', img_id + '.jpg'), np.full((h, w, 3), 90, np.uint8))
        if isinstance(objects, str):
            xml = objects
        else:
            size_xml = f'<size><width>{w}</width><height>{h}</height><depth>3</depth></size>' if size else ''
            xml = f'<annotation><filename>{img_id}.jpg</filename>{size_xml}{"".join(objects)}</annotation>'
        with open(os.path.join(root, 'Annotations', img_id + '.xml'), 'w') as f:
            f.write(xml)
    with open(os.path.join(root, 'ImageSets', 'Main', split + '.txt'), 'w') as f:
        f.write('\n'.join(items) + '\n')


def load(root, **kw):
    return VOCDataset(data_root=str(root), ann_file='ImageSets/Main/train.txt', **kw)


def infos(ds) -> list[dict]:
    return [ds.get_data_info(i) for i in range(len(ds))]


def test_loads_one_based_boxes_and_difficult(tmp_path):
    write_voc(tmp_path, {'000001': [obj('dog', (11, 6, 30, 15)), obj('cat', (1, 1, 8, 8), difficult=1)],
                         '000002': [obj('person', (50, 40, 80, 60))]})
    ds = load(tmp_path)
    a, b = infos(ds)
    assert a['img_id'] == '000001' and (a['height'], a['width']) == (48, 64)
    assert a['img_path'] == os.path.join(str(tmp_path), 'JPEGImages', '000001.jpg')
    assert [i['bbox'] for i in a['instances']] == [[10.0, 5.0, 30.0, 15.0], [0.0, 0.0, 8.0, 8.0]]
    assert [i['bbox_label'] for i in a['instances']] == [VOC_CLASSES.index('dog'), VOC_CLASSES.index('cat')]
    assert [i['ignore_flag'] for i in a['instances']] == [0, 1]
    assert b['instances'][0]['bbox'] == [49.0, 39.0, 64.0, 48.0]  # clipped to 64x48
    assert ds.get_cat_ids(1) == [VOC_CLASSES.index('person')]
    assert ds.metainfo['classes'] == VOC_CLASSES and len(ds.metainfo['palette']) == 20


def test_custom_classes_registry_and_lazy_metainfo(tmp_path):
    write_voc(tmp_path, {'a': [obj('ship', (1, 1, 10, 10))]})
    ds = DATASETS.build(dict(type='VOCDataset', data_root=str(tmp_path), ann_file='ImageSets/Main/train.txt',
                             classes=['plane', 'ship'], pipeline=[lambda r: dict(r, seen=True)]))
    assert ds[0]['seen'] and ds[0]['instances'][0]['bbox_label'] == 1
    lazy = VOCDataset(data_root=str(tmp_path), ann_file='nope.txt', lazy_init=True)
    assert lazy.metainfo['classes'] == VOC_CLASSES
    with pytest.raises(DataFileNotFoundError, match='nope.txt'):
        lazy.full_init()


def test_missing_size_read_from_image(tmp_path):
    write_voc(tmp_path, {'a': [obj('dog', (1, 1, 10, 10))]}, size=False, h=20, w=30)
    info = load(tmp_path).get_data_info(0)
    assert (info['height'], info['width']) == (20, 30)


@pytest.mark.parametrize('kind,box,value', [('non-positive box size', (10, 5, 4, 9), '[10, 5, 4, 9]'),
                                            ('box outside image', (70, 5, 80, 9), '70'),
                                            ('malformed box', (1, 'x', 3, 4), "'x'")])
def test_bad_box_fails_with_details(tmp_path, kind, box, value):
    write_voc(tmp_path, {'img7': [obj('dog', (1, 1, 5, 5)), obj('dog', box)]})
    with pytest.raises(DataError) as err:
        load(tmp_path)
    msg = str(err.value)
    for part in ('img7.xml', 'object 1', 'img7.jpg', value, kind, 'on_bad_annotation: skip', 'expected'):
        assert part in msg, (part, msg)


def test_unknown_class_name_fails(tmp_path):
    write_voc(tmp_path, {'a': [obj('dgo', (1, 1, 5, 5))]})
    with pytest.raises(DataError) as err:
        load(tmp_path)
    msg = str(err.value)
    assert "'dgo'" in msg and 'a.xml' in msg and 'object 0' in msg and "'dog'" in msg


def test_malformed_xml_and_missing_files_fail(tmp_path):
    write_voc(tmp_path, {'a': '<annotation><object>'})
    with pytest.raises(DataError, match=r'a\.xml.*not well-formed'):
        load(tmp_path)
    write_voc(tmp_path, {'b': [obj('dog', (1, 1, 5, 5))]}, no_image=['b'])
    with pytest.raises(DataFileNotFoundError, match=r'b\.jpg'):
        load(tmp_path)
    os.remove(tmp_path / 'Annotations' / 'b.xml')
    with pytest.raises(DataFileNotFoundError, match=r'b\.xml'):
        load(tmp_path)
    with pytest.raises(DataError, match='on_bad_annotation must be one of'):
        load(tmp_path, on_bad_annotation='drop')


def test_skip_drops_with_one_counted_warning(tmp_path):
    write_voc(tmp_path, {'a': [obj('dog', (1, 1, 5, 5)), obj('dgo', (1, 1, 5, 5)), obj('cat', (9, 9, 3, 3))],
                         'b': '<annotation>', 'c': [obj('dog', (2, 2, 6, 6))], 'd': [obj('cat', (1, 1, 5, 5))]},
              no_image=['c'])
    with pytest.warns(BadAnnotationWarning) as rec:
        ds = load(tmp_path, on_bad_annotation='skip')
    assert len(rec) == 1
    msg = str(rec[0].message)
    for part in ('skipped 4', 'train.txt', 'unknown class name: 1', 'non-positive box size: 1',
                 'malformed XML file: 1', 'missing image: 1', "'dgo'"):
        assert part in msg, (part, msg)
    assert [(d['img_id'], [i['bbox'] for i in d['instances']]) for d in infos(ds)] == [
        ('a', [[0.0, 0.0, 5.0, 5.0]]), ('d', [[0.0, 0.0, 5.0, 5.0]])]


def test_filter_empty_gt(tmp_path):
    write_voc(tmp_path, {'a': [obj('dog', (1, 1, 5, 5))], 'b': [], 'c': [obj('cat', (1, 1, 5, 5), difficult=1)]})
    assert [d['img_id'] for d in infos(load(tmp_path))] == ['a']
    assert len(load(tmp_path, filter_empty_gt=False)) == 3
    assert len(load(tmp_path, test_mode=True)) == 3


def test_xml_size_must_be_the_image_size(tmp_path):
    """VOC <size> 64x48 for a 48x64 JPEG was accepted and the boxes clipped to the wrong size."""
    write_voc(tmp_path, {'000001': [obj('dog', (11, 6, 30, 15))]})
    cv2.imwrite(str(tmp_path / 'JPEGImages' / '000001.jpg'), np.zeros((64, 48, 3), np.uint8))
    ds = load(tmp_path, pipeline=[dict(type='LoadImageFromFile'), dict(type='LoadAnnotations')])
    with pytest.raises(DataError, match=r'000001\.jpg is 48x64 \(WxH\) but its annotation says width 64, height 48'):
        ds[0]


def test_split_list_naming_an_image_twice_is_an_error_naming_both_lines(tmp_path):
    from detection.datasets.voc import read_split

    split = tmp_path / "trainval.txt"
    split.write_text("000001\n\n000002\n000001 1\n")
    with pytest.raises(DataError, match=r"trainval.txt: lines 1 and 4 both name image '000001'; expected each "):
        read_split(str(split))
    split.write_text("000001\n000002\n")
    assert read_split(str(split)) == ["000001", "000002"]
