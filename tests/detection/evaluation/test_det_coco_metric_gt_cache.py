"""CocoMetric parses its annotation file once per version of the file (``parsed_gt``): metrics of one process share
the parsed ground truth while one holds it, a rewritten file is read again, nothing is kept after the last metric,
and an ``ann_file`` URL (``memory://`` here) is evaluated as the local file, a missing one named in one message."""

from __future__ import annotations

import gc
import json
import os

import numpy as np
import pytest
import torch
from mmengine.structures import InstanceData

from detection.evaluation import coco_metric
from detection.evaluation.coco_metric import CocoMetric
from detection.structures import DetDataSample
from oars.data import storage
from oars.errors import DataFileNotFoundError

CLASSES, CAT_IDS = ('cat', 'dog'), (3, 7)


def gt_json(shift: float = 0.0) -> dict:
    """Two images, three boxes; ``shift`` moves the gt boxes (a different file, different scores)."""
    images = [{'id': i, 'height': 100, 'width': 100, 'file_name': f'{i}.jpg'} for i in (1, 2)]
    boxes = [(1, 3, [10 + shift, 10, 30, 30]), (1, 7, [50, 50, 40, 30]), (2, 3, [5, 5, 60, 60])]
    anns = [{'id': k + 1, 'image_id': i, 'category_id': c, 'bbox': b, 'area': b[2] * b[3], 'iscrowd': 0}
            for k, (i, c, b) in enumerate(boxes)]
    return {'images': images, 'annotations': anns, 'categories': [{'id': c, 'name': n} for c, n in zip(CAT_IDS,
                                                                                                      CLASSES)]}


def samples() -> list[DetDataSample]:
    preds = {1: ([[10, 10, 40, 40], [50, 50, 90, 80]], [0.9, 0.8], [0, 1]), 2: ([[5, 5, 65, 65]], [0.7], [0])}
    out = []
    for img_id, (boxes, scores, labels) in preds.items():
        s = DetDataSample(metainfo={'img_id': img_id, 'img_path': f'{img_id}.jpg', 'ori_shape': (100, 100)})
        s.pred_instances = InstanceData(bboxes=torch.tensor(boxes, dtype=torch.float32),
                                        scores=torch.tensor(scores), labels=torch.tensor(labels))
        out.append(s)
    return out


def evaluate(metric: CocoMetric) -> float:
    metric.dataset_meta = {'classes': CLASSES, 'cat_ids': CAT_IDS}
    metric.results = []
    metric.process({}, samples())
    return metric.compute_metrics(metric.results)['bbox_mAP']


@pytest.fixture
def parses(monkeypatch):
    """The list of paths pycocotools parsed (``COCO(path)`` inside the metric), on an empty shared table."""
    seen: list[str] = []

    class Counting(coco_metric.COCO):
        def __init__(self, annotation_file=None):
            if annotation_file is not None:
                seen.append(annotation_file)
            super().__init__(annotation_file)

    monkeypatch.setattr(coco_metric, 'COCO', Counting)
    monkeypatch.setattr(coco_metric, '_PARSED', coco_metric.weakref.WeakValueDictionary())
    return seen


def test_metrics_share_one_parse_until_the_file_changes(tmp_path, parses):
    path = tmp_path / 'gt.json'
    path.write_text(json.dumps(gt_json()))
    a, b = CocoMetric(ann_file=str(path)), CocoMetric(ann_file=str(path))
    first = evaluate(a)
    assert evaluate(a) == evaluate(b) == first > 0.5
    assert parses == [str(path)]  # three evaluations by two metrics: one parse
    path.write_text(json.dumps(gt_json(shift=7.5)))  # a rewritten file (another size): read again
    os.utime(path, ns=(1, 1))
    changed = evaluate(a)
    assert len(parses) == 2 and changed < first
    assert evaluate(b) == changed and len(parses) == 2


def test_nothing_is_kept_after_the_last_metric(tmp_path, parses):
    path = tmp_path / 'gt.json'
    path.write_text(json.dumps(gt_json()))
    metric = CocoMetric(ann_file=str(path))
    evaluate(metric)
    assert len(coco_metric._PARSED) == 1
    del metric
    gc.collect()
    assert len(coco_metric._PARSED) == 0
    evaluate(CocoMetric(ann_file=str(path)))
    assert len(parses) == 2  # parsed again: nothing held it


def test_an_ann_file_url_evaluates_as_the_local_file(tmp_path, monkeypatch, parses):
    fsspec = pytest.importorskip('fsspec', reason='fsspec (the data extra) reads URLs')
    monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path / 'cache'))
    monkeypatch.setattr(storage, '_registered', {})
    path = tmp_path / 'gt.json'
    path.write_text(json.dumps(gt_json()))
    fs = fsspec.filesystem('memory')
    fs.pipe('/oars-coco-metric/gt.json', path.read_bytes())
    try:
        url = 'memory://oars-coco-metric/gt.json'
        assert evaluate(CocoMetric(ann_file=url)) == evaluate(CocoMetric(ann_file=str(path)))
        assert parses[0].startswith(str(tmp_path / 'cache'))  # pycocotools read the cached copy
        with pytest.raises(DataFileNotFoundError, match=r"CocoMetric: ann_file 'memory://oars-coco-metric/no\.json' "
                                                        'does not exist'):
            CocoMetric(ann_file='memory://oars-coco-metric/no.json')
        metric = CocoMetric()
        metric.dataset_meta = {'classes': CLASSES, 'cat_ids': CAT_IDS, 'ann_file': 'memory://oars-coco-metric/x.json'}
        metric.process({}, samples())
        with pytest.raises(DataFileNotFoundError, match=r"annotation file 'memory://oars-coco-metric/x\.json' does"):
            metric.compute_metrics(metric.results)
    finally:
        fs.rm('/oars-coco-metric', recursive=True)
    assert np.isfinite(evaluate(CocoMetric(ann_file=str(path))))
