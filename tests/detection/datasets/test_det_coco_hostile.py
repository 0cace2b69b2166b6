"""CocoDataset on hostile COCO files: non-finite coordinates (pycocotools segfaults or eats memory on them),
polygons no mask can be made of (a Mask R-CNN trained with zero losses), duplicated ids (pycocotools keeps the
last entry of an id and loses the others silently). Every case is a ``DataError`` naming the file and the entry,
or under ``on_bad_annotation: skip`` one counted warning."""

from __future__ import annotations

import json
import os
import warnings

import pytest
from test_det_coco_dataset import CATEGORIES, ann, write_image

from detection.datasets import BadAnnotationWarning, CocoDataset
from oars.errors import DataError

MASK_PIPELINE = [dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', with_bbox=True, with_mask=True)]
BOX_PIPELINE = [dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', with_bbox=True)]
TRIANGLE = [[10, 5, 30, 5, 30, 15]]


def write_raw(root, doc: dict, images=('a.png', 'b.png')) -> str:
    """Write ``doc`` as annotations/ann.json (NaN and Infinity as JSON's non-standard literals, as Python and
    many exporters write them) and the named images; returns the json path."""
    for name in images:
        write_image(os.path.join(root, 'images', 'train', name))
    path = os.path.join(root, 'annotations', 'ann.json')
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        json.dump(doc, f, allow_nan=True)
    return path


def images(*names: str) -> list[dict]:
    return [{'id': i, 'file_name': n, 'height': 48, 'width': 64} for i, n in enumerate(names, start=1)]


def doc(annotations, imgs=None, categories=CATEGORIES) -> dict:
    return {'images': images('a.png', 'b.png') if imgs is None else imgs, 'annotations': annotations,
            'categories': categories}


def load(root, **kw) -> CocoDataset:
    kw.setdefault('classes', ['dog', 'cat'])
    return CocoDataset(data_root=str(root), ann_file='annotations/ann.json', **kw)


def message(err: pytest.ExceptionInfo) -> str:
    return str(err.value)


# ---- 1. non-finite coordinates ------------------------------------------------------------------------------
@pytest.mark.parametrize('value', [float('nan'), float('inf'), float('-inf')])
@pytest.mark.parametrize('pipeline', [MASK_PIPELINE, BOX_PIPELINE], ids=['masks', 'boxes'])
def test_non_finite_polygon_coordinate_is_an_error(tmp_path, value, pipeline):
    bad = ann(42, 2, 7, [10, 5, 20, 10], segmentation=[[10, 5, 30, 5], [10, 5, 30, value, 30, 15]])
    write_raw(tmp_path, doc([ann(1, 1, 7, [10, 5, 20, 10], segmentation=TRIANGLE), bad]))
    with pytest.raises(DataError) as err:  # before: loaded, and pycocotools crashed on the first batch
        load(tmp_path, pipeline=pipeline)
    msg = message(err)
    for part in ('ann.json', 'annotation id 42', 'image id 2', 'b.png', 'polygon 1', 'non-finite',
                 str(value), 'malformed mask', 'on_bad_annotation: skip'):
        assert part in msg, (part, msg)


def test_non_finite_polygon_is_dropped_and_counted_under_skip(tmp_path):
    write_raw(tmp_path, doc([ann(1, 1, 7, [10, 5, 20, 10], segmentation=TRIANGLE),
                             ann(2, 1, 7, [10, 5, 20, 10], segmentation=[[10, 5, float('nan'), 5, 30, 15]])]))
    with pytest.warns(BadAnnotationWarning, match='malformed mask: 1') as rec:
        ds = load(tmp_path, pipeline=MASK_PIPELINE, on_bad_annotation='skip')
    assert len(rec) == 1 and 'annotation id 2' in str(rec[0].message)
    assert [i['ann_id'] for i in ds.get_data_info(0)['instances']] == [1]
    assert ds[0]['gt_masks'].shape == (1, 48, 64)


def test_non_numeric_polygon_value_is_an_error(tmp_path):
    write_raw(tmp_path, doc([ann(7, 1, 7, [10, 5, 20, 10], segmentation=[[10, 5, 'x', 5, 30, 15]])]))
    with pytest.raises(DataError) as err:  # before: ValueError from float('x'), with a traceback
        load(tmp_path)
    msg = message(err)
    assert 'annotation id 7' in msg and "'x'" in msg and 'ann.json' in msg and 'expected numbers' in msg


@pytest.mark.parametrize('bbox', [[1, 2, float('nan'), 4], [1, float('inf'), 3, 4]])
def test_non_finite_bbox_is_an_error(tmp_path, bbox):
    write_raw(tmp_path, doc([ann(1, 1, 7, [10, 5, 20, 10]), ann(9, 2, 3, bbox)]))
    with pytest.raises(DataError) as err:
        load(tmp_path)
    msg = message(err)
    for part in ('ann.json', 'annotation id 9', 'image id 2', 'malformed box', '4 finite numbers'):
        assert part in msg, (part, msg)


def test_rle_without_counts_is_an_error(tmp_path):
    write_raw(tmp_path, doc([ann(3, 1, 7, [1, 1, 5, 5], segmentation={'size': [48, 64]})]))
    with pytest.raises(DataError, match=r"annotation id 3: RLE 'counts' must be"):
        load(tmp_path)


# ---- 2. polygons no mask can be made of ---------------------------------------------------------------------
def unusable_set(tmp_path, usable: int = 0) -> None:
    """30 polygons of fewer than 3 points and 7 of zero area (collinear points), plus ``usable`` triangles."""
    anns = [ann(i, 1 + i % 2, 7, [1, 1, 20, 20], segmentation=[[1, 1, 20, 20]]) for i in range(1, 31)]
    anns += [ann(i, 1 + i % 2, 3, [1, 1, 20, 20], segmentation=[[1, 1, 10, 10, 20, 20]]) for i in range(31, 38)]
    anns += [ann(i, 1, 7, [10, 5, 20, 10], segmentation=TRIANGLE) for i in range(38, 38 + usable)]
    write_raw(tmp_path, doc(anns))


def test_mask_training_set_without_a_usable_polygon_is_an_error_with_counts(tmp_path):
    unusable_set(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter('error', BadAnnotationWarning)  # the error alone, no warning before it
        with pytest.raises(DataError) as err:  # before: trained with loss_bbox = loss_mask = 0, exit 0
            load(tmp_path, pipeline=MASK_PIPELINE, on_bad_annotation='skip')
    msg = message(err)
    for part in ('ann.json', '0 usable instances of 37 annotation(s) in 2 image(s)',
                 '30 polygon with fewer than 3 points', '7 zero-area polygon'):
        assert part in msg, (part, msg)


def test_unusable_polygons_are_dropped_with_a_counted_warning_by_default(tmp_path):
    """Under the default on_bad_annotation: fail too: COCO train itself holds degenerate polygons, and dropping
    one costs only that instance; the warning names them and counts them per reason."""
    unusable_set(tmp_path, usable=2)
    with pytest.warns(BadAnnotationWarning) as rec:
        ds = load(tmp_path, pipeline=MASK_PIPELINE)
    assert len(rec) == 1
    msg = str(rec[0].message)
    for part in ('ann.json', 'skipped 37 bad annotation(s)', 'no mask can be made of them',
                 'polygon with fewer than 3 points: 30', 'zero-area polygon: 7', 'annotation id 2',
                 'polygon 0 has 4 number(s)', 'at least 3 [x, y] points'):
        assert part in msg, (part, msg)
    assert [i['ann_id'] for i in ds.get_data_info(0)['instances']] == [38, 39]


def test_some_unusable_polygons_are_dropped_with_one_counted_warning(tmp_path):
    unusable_set(tmp_path, usable=2)
    with pytest.warns(BadAnnotationWarning) as rec:
        ds = load(tmp_path, pipeline=MASK_PIPELINE, on_bad_annotation='skip')
    assert len(rec) == 1
    msg = str(rec[0].message)
    for part in ('skipped 37 bad annotation(s)', 'polygon with fewer than 3 points: 30', 'zero-area polygon: 7'):
        assert part in msg, (part, msg)
    assert len(ds) == 1 and [i['ann_id'] for i in ds.get_data_info(0)['instances']] == [38, 39]
    assert ds[0]['gt_masks'].sum() > 0


def test_polygon_usability_only_matters_when_masks_are_loaded(tmp_path):
    unusable_set(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter('error', BadAnnotationWarning)
        ds = load(tmp_path, pipeline=BOX_PIPELINE)  # a box model: the polygons are never read
    assert sum(len(ds.get_data_info(i)['instances']) for i in range(len(ds))) == 37
    val = load(tmp_path, pipeline=MASK_PIPELINE, test_mode=True)  # evaluation: kept, ignored as MMDetection does
    assert sum(len(val.get_data_info(i)['instances']) for i in range(len(val))) == 37
    assert val[0]['gt_ignore_flags'].all()


def test_a_usable_polygon_beside_unusable_ones_keeps_the_instance(tmp_path):
    polygons = [[1, 1, 2, 2], [0, 0, 5, 5, 9, 9]] + TRIANGLE  # too few points, zero area, a triangle
    write_raw(tmp_path, doc([ann(1, 1, 7, [10, 5, 20, 10], segmentation=polygons)]))
    with warnings.catch_warnings():
        warnings.simplefilter('error', BadAnnotationWarning)
        ds = load(tmp_path, pipeline=MASK_PIPELINE)
    assert ds.get_data_info(0)['instances'][0]['mask'] == [[10.0, 5.0, 30.0, 5.0, 30.0, 15.0]]


def test_box_training_set_without_a_usable_box_is_an_error_with_counts(tmp_path):
    anns = [ann(1, 1, 7, [5, 5, 0, 4]), ann(2, 1, 7, [5, 5, 4, -1]), ann(3, 2, 3, [100, 100, 4, 4]),
            dict(ann(4, 2, 3, [1, 1, 4, 4]), iscrowd=1), ann(5, 2, 9, [1, 1, 4, 4])]
    write_raw(tmp_path, doc(anns))
    with pytest.raises(DataError) as err:
        load(tmp_path, on_bad_annotation='skip')
    msg = message(err)
    for part in ('0 usable instances of 5 annotation(s) in 2 image(s)', '2 non-positive box size',
                 '1 box outside image', '1 crowd (iscrowd: 1)', '1 category not in `classes`'):
        assert part in msg, (part, msg)


def test_training_on_crowd_only_is_an_error_also_without_filter_empty_gt(tmp_path):
    write_raw(tmp_path, doc([dict(ann(1, 1, 7, [1, 1, 4, 4]), iscrowd=1)]))
    with pytest.raises(DataError, match=r'0 usable instances of 1 annotation\(s\) .*1 crowd'):
        load(tmp_path, filter_empty_gt=False)  # before: trained on background only
    assert len(load(tmp_path, test_mode=True)) == 2  # an evaluation set may hold no usable instance


def test_demo_shapes_mask_training_set_loads_without_warnings(tmp_path):
    from oars.data.demo_shapes import generate

    generate(str(tmp_path), num_train=40, num_val=2, size=128, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter('error', BadAnnotationWarning)
        ds = CocoDataset(data_root=str(tmp_path), ann_file='annotations/instances_train.json',
                         classes=['circle', 'square', 'triangle'], pipeline=MASK_PIPELINE)
    raw = json.loads((tmp_path / 'annotations' / 'instances_train.json').read_text())
    assert sum(len(ds.get_data_info(i)['instances']) for i in range(len(ds))) == len(raw['annotations'])


# ---- 3. duplicated ids --------------------------------------------------------------------------------------
def test_duplicate_image_id_is_an_error_naming_both_entries(tmp_path):
    imgs = images('a.png', 'b.png', 'c.png')
    imgs[2]['id'] = 1
    write_raw(tmp_path, doc([ann(1, 1, 7, [1, 1, 4, 4])], imgs), images=('a.png', 'b.png', 'c.png'))
    with pytest.raises(DataError) as err:  # before: a.png and its annotation disappeared silently
        load(tmp_path)
    msg = message(err)
    assert "images[0] and images[2] both have id 1 ('a.png', 'c.png')" in msg and 'ann.json' in msg, msg


def test_duplicate_annotation_id_is_an_error_naming_both_entries(tmp_path):
    write_raw(tmp_path, doc([ann(5, 1, 7, [1, 1, 4, 4]), ann(6, 1, 7, [1, 1, 4, 4]), ann(5, 2, 3, [1, 1, 4, 4])]))
    with pytest.raises(DataError) as err:
        load(tmp_path)
    msg = message(err)
    assert 'annotations[0] and annotations[2] both have id 5 (image ids 1 and 2)' in msg and 'ann.json' in msg, msg


def test_duplicate_category_id_is_an_error_naming_both_entries(tmp_path):
    cats = [{'id': 3, 'name': 'cat'}, {'id': 7, 'name': 'dog'}, {'id': 3, 'name': 'bird'}]
    write_raw(tmp_path, doc([ann(1, 1, 7, [1, 1, 4, 4])], categories=cats))
    with pytest.raises(DataError) as err:
        load(tmp_path)
    msg = message(err)
    assert "categories[0] and categories[2] both have id 3 ('cat', 'bird')" in msg and 'ann.json' in msg, msg


@pytest.mark.parametrize('where,value', [('images', [1]), ('annotations', {'a': 1}), ('image_id', [2])])
def test_unhashable_id_is_an_error(tmp_path, where, value):
    anns = [ann(1, 1, 7, [1, 1, 4, 4])]
    d = doc(anns)
    if where == 'images':
        d['images'][1]['id'] = value
    elif where == 'annotations':
        anns[0]['id'] = value
    else:
        anns[0]['image_id'] = value
    write_raw(tmp_path, d)
    with pytest.raises(DataError) as err:  # before: TypeError: unhashable type, from pycocotools' index
        load(tmp_path)
    msg = message(err)
    assert 'ann.json' in msg and repr(value) in msg and 'expected a number or a string' in msg, msg


def test_annotation_of_an_unlisted_image_is_an_error(tmp_path):
    write_raw(tmp_path, doc([ann(1, 1, 7, [1, 1, 4, 4]), ann(2, 9, 7, [1, 1, 4, 4])]))
    with pytest.raises(DataError) as err:
        load(tmp_path)
    msg = message(err)
    assert 'annotation id 2' in msg and 'image_id 9' in msg and 'ann.json' in msg, msg


def test_polygon_table_areas_match_the_shoelace_formula_across_chunks(monkeypatch):
    import numpy as np

    from detection.datasets import coco_checks
    from detection.datasets.converters import polygon_area

    rng = np.random.default_rng(0)
    anns = [{'id': i, 'segmentation': [rng.uniform(0, 50, 2 * int(n)).tolist() for n in rng.integers(3, 9, 2)]}
            for i in range(40)]
    anns.append({'id': 'odd', 'segmentation': [[0, 0, 4, 0, 4], [1, 1], [0, 0, 4, 0, 8, 0], 5]})
    anns.append({'id': 'huge', 'segmentation': [[0, 0, 10 ** 400, 0, 4, 4]]})
    monkeypatch.setattr(coco_checks, '_CHUNK_POINTS', 7)  # several chunks, some polygons larger than one
    table = coco_checks.polygon_table(anns)
    for i in range(40):
        first, end = table.ranges[i]
        expected = [polygon_area(np.asarray(p).reshape(-1, 2)) for p in anns[i]['segmentation']]
        np.testing.assert_allclose(table.area[first:end], expected, rtol=1e-9)
        assert table.polygons(i) == anns[i]['segmentation'] and table.corrupt(i) is None
    assert table.polygons('odd') == [] and table.unusable('odd')[0] == coco_checks.POLYGON_ZERO_AREA
    assert 'holds' in table.corrupt('huge')


def test_pipeline_loads_masks_looks_into_nested_transforms():
    from types import SimpleNamespace

    from detection.datasets.base import pipeline_loads_masks
    from detection.transforms import LoadAnnotations

    assert pipeline_loads_masks([LoadAnnotations(with_mask=True)])
    assert not pipeline_loads_masks([LoadAnnotations(), lambda r: r])
    assert pipeline_loads_masks(SimpleNamespace(transforms=[SimpleNamespace(transforms=[[
        LoadAnnotations(with_mask=True)]])]))
