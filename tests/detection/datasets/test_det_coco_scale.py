"""CocoDataset at scale: the kept instances are numpy arrays (not per-annotation dicts), the data infos equal a plain
reading of the file (pycocotools' index, annotation by annotation), bad files get the same errors, and DataLoader
workers share the index instead of copying it."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import pickle

import numpy as np
import pytest
from pycocotools.coco import COCO

from benchmarks.data_scale import write_coco
from detection.datasets import CocoDataset
from detection.datasets.coco_index import CocoIndex, box_array
from oars.errors import DataError

CLASSES = [f'class{c}' for c in range(1, 81)]


def _reference(ann_file: str, img_dir: str, classes: list[str]) -> list[dict]:
    """The data infos of a clean file read the plain way: pycocotools' index, one annotation at a time (boxes
    xywh -> xyxy clipped to the image, crowd -> ignored, other categories left out, images in file order)."""
    coco = COCO(ann_file)
    label_of = {c['id']: classes.index(c['name']) for c in coco.dataset['categories'] if c['name'] in classes}
    out = []
    for img_id, img in coco.imgs.items():
        w, h = img['width'], img['height']
        instances = []
        for ann in coco.imgToAnns.get(img_id, []):
            if ann['category_id'] not in label_of:
                continue
            x, y, bw, bh = (float(v) for v in ann['bbox'])
            box = [min(max(x, 0.0), w), min(max(y, 0.0), h), min(max(x + bw, 0.0), w), min(max(y + bh, 0.0), h)]
            inst = {'bbox': box, 'bbox_label': label_of[ann['category_id']], 'ignore_flag': int(ann['iscrowd']),
                    'ann_id': ann['id']}
            if ann.get('segmentation'):
                inst['mask'] = [[float(v) for v in p] for p in ann['segmentation']]
            instances.append(inst)
        out.append({'img_path': os.path.join(img_dir, img['file_name']), 'img_id': img_id, 'height': h, 'width': w,
                    'instances': instances})
    return out


@pytest.fixture(scope='module')
def scale_file(tmp_path_factory):
    root = tmp_path_factory.mktemp('coco_scale')
    ann_file, img_dir = str(root / 'ann.json'), str(root / 'images')
    write_coco(ann_file, img_dir, 100_000)
    return ann_file, img_dir


@pytest.mark.slow  # ~20 s: writing and reading a 100k-box file and its 12,500 (empty) images
def test_a_100k_box_file_is_indexed_in_arrays_and_equals_a_plain_reading(scale_file):
    ann_file, img_dir = scale_file
    ds = CocoDataset(ann_file=ann_file, data_prefix={'img': img_dir}, classes=CLASSES, test_mode=True)
    index = ds._index
    assert isinstance(index, CocoIndex) and len(index) == 100_000
    for name in ('boxes', 'labels', 'ignore', 'ann_ids', 'mask_kind', 'values'):
        assert isinstance(getattr(index, name), np.ndarray) and getattr(index, name).dtype != object, name
    assert index.boxes.shape == (100_000, 4) and index.ann_ids.dtype == np.int64
    # what the workers share: the serialised records and the arrays; a record holds no instance dict
    assert isinstance(ds.data_bytes, np.ndarray) and ds.data_bytes.dtype == np.uint8
    record = pickle.loads(ds.data_bytes[:int(ds.data_address[0])].tobytes())
    assert 'instances' not in record and isinstance(record['_instances'], tuple)
    # the data infos equal the plain reading, image by image (a sample of them: the whole file is slow to compare)
    reference = _reference(ann_file, img_dir, CLASSES)
    assert len(ds) == len(reference)
    for i in list(range(0, len(ds), 997)) + [len(ds) - 1]:
        info = ds.get_data_info(i)
        assert info.pop('sample_idx') == i
        assert info == reference[i], i


def test_training_set_drops_images_without_usable_boxes_as_before(tmp_path):
    ann_file, img_dir = str(tmp_path / 'ann.json'), str(tmp_path / 'images')
    write_coco(ann_file, img_dir, 400, polygons=False)
    ds = CocoDataset(ann_file=ann_file, data_prefix={'img': img_dir}, classes=['class1', 'class2'])
    reference = [r for r in _reference(ann_file, img_dir, ['class1', 'class2'])
                 if any(not inst['ignore_flag'] for inst in r['instances'])]
    assert 0 < len(ds) < 50  # 2 of 80 classes: most images have none of them
    assert [{k: v for k, v in ds.get_data_info(i).items() if k != 'sample_idx'} for i in range(len(ds))] == reference
    # serialize_data: false keeps full data infos in data_list (what the converters read)
    plain = CocoDataset(ann_file=ann_file, data_prefix={'img': img_dir}, classes=['class1', 'class2'],
                        serialize_data=False)
    assert [d['instances'] for d in plain.data_list] == [r['instances'] for r in reference]


def test_box_array_takes_what_as_box_takes_and_nothing_else():
    values = [[1, 2, 3, 4], [1, 2, None, 4], [1, 2, 3], 'abcd', None, ['1', '2', '3', '4'], [1, 2, float('nan'), 4],
              [1e400, 0, 1, 1]]
    boxes, ok = box_array(values)
    assert ok.tolist() == [True, False, False, False, False, True, False, False]
    assert boxes[0].tolist() == [1, 2, 3, 4] and boxes[5].tolist() == [1, 2, 3, 4]
    good, ok = box_array([[0.5, 1, 2, 3]] * 3)  # the one-array fast path
    assert ok.all() and good.tolist() == [[0.5, 1, 2, 3]] * 3


@pytest.mark.parametrize('break_it, expected', [
    (lambda d: d['annotations'][5].update(id=d['annotations'][2]['id']), 'both have id'),
    (lambda d: d['annotations'][7].pop('category_id'), "annotations[7] has no ['category_id']"),
    (lambda d: d['annotations'][3].update(image_id=True), 'has image_id True; expected a number or a string'),
    (lambda d: d['annotations'][4].update(bbox=[1, 2, 3]), 'annotation id 5: bbox [1, 2, 3]; expected [x, y, width'),
    (lambda d: d['annotations'][6].update(bbox=[700, 10, 5, 5]), 'no overlap with the 640x480 (WxH) image'),
    (lambda d: d['annotations'][8].update(category_id=999), 'category_id 999 is not among'),
    (lambda d: d['annotations'][9].update(segmentation=[[1, 2, float('nan'), 4, 5, 6]]), 'non-finite coordinate'),
])
def test_a_bad_annotation_in_a_large_file_gets_the_one_message(tmp_path, break_it, expected):
    ann_file, img_dir = str(tmp_path / 'ann.json'), str(tmp_path / 'images')
    write_coco(ann_file, img_dir, 2000)
    with open(ann_file) as f:
        data = json.load(f)
    break_it(data)
    with open(ann_file, 'w') as f:
        json.dump(data, f)
    with pytest.raises(DataError) as err:
        CocoDataset(ann_file=ann_file, data_prefix={'img': img_dir}, classes=CLASSES)
    assert expected in str(err.value) and ann_file in str(err.value), str(err.value)
    assert str(err.value).count('\n') == 0


def _read_share(ds, k: int, queue) -> None:
    from benchmarks.data_scale import _smaps

    before = _smaps()['uss']
    for i in range(k, len(ds), 2):
        ds.get_data_info(i)
    queue.put(_smaps()['uss'] - before)


@pytest.mark.slow  # shares the 100k-box file
@pytest.mark.skipif(not os.path.exists('/proc/self/smaps_rollup'), reason='needs /proc/self/smaps_rollup (Linux)')
def test_forked_workers_share_the_index_instead_of_copying_it(scale_file):
    ann_file, img_dir = scale_file
    ds = CocoDataset(ann_file=ann_file, data_prefix={'img': img_dir}, classes=CLASSES, test_mode=True)
    shared_mb = (ds._index.nbytes + ds.data_bytes.nbytes) / 2 ** 20
    assert shared_mb > 8  # what a worker would copy if it did
    ctx = mp.get_context('fork')  # what DataLoader workers are on Linux
    queue = ctx.Queue()
    procs = [ctx.Process(target=_read_share, args=(ds, k, queue)) for k in range(2)]
    for p in procs:
        p.start()
    added = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join()
    # each worker read every data info of its half: it copied a small part of what the index holds
    assert all(mb < shared_mb / 4 for mb in added), (added, shared_mb)
