"""CocoMetric equals a direct pycocotools run, from the annotation file and from in-memory ground truth."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest
import torch
from mmengine.evaluator import Evaluator
from mmengine.structures import InstanceData
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from detection.evaluation import CocoMetric
from detection.registry import METRICS
from detection.structures import DetDataSample

CLASSES = ('cat', 'dog')
CAT_IDS = (3, 7)  # non-contiguous on purpose
STAT_KEYS = ('bbox_mAP', 'bbox_mAP_50', 'bbox_mAP_75', 'bbox_mAP_s', 'bbox_mAP_m', 'bbox_mAP_l',
             'bbox_AR@1', 'bbox_AR@10', 'bbox_AR@100', 'bbox_AR_s@100', 'bbox_AR_m@100', 'bbox_AR_l@100')
SIZE = 400


def _make_data(seed=0, num_images=6, crowd=True):
    """GT json dict (areas = w * h, one crowd box) and per image: gt xyxy/labels/crowd flag, predictions."""
    rng = np.random.default_rng(seed)
    images, anns, per_image = [], [], []
    for img_id in range(1, num_images + 1):
        images.append({'id': img_id, 'height': SIZE, 'width': SIZE, 'file_name': f'{img_id}.jpg'})
        n = int(rng.integers(1, 6))
        xy = rng.uniform(0, SIZE * 0.6, (n, 2))
        wh = np.exp(rng.uniform(np.log(8), np.log(SIZE * 0.5), (n, 2)))  # small, medium and large boxes
        gt = np.concatenate([xy, xy + wh], 1).astype(np.float32).astype(np.float64)
        labels = rng.integers(0, 2, n)
        is_crowd = np.zeros(n, bool)
        if crowd and img_id == 2:
            is_crowd[0] = True
        for b, lab, c in zip(gt, labels, is_crowd):
            w, h = b[2] - b[0], b[3] - b[1]
            anns.append({'id': len(anns) + 1, 'image_id': img_id, 'category_id': CAT_IDS[lab],
                         'bbox': [b[0], b[1], w, h], 'area': w * h, 'iscrowd': int(c)})
        # predictions: jittered copies of the gt (some with the wrong class) plus random boxes
        k = int(rng.integers(0, 3))
        pb = np.concatenate([gt + rng.normal(0, 2, gt.shape), np.concatenate([xy[:k], xy[:k] + 20], 1)])
        pl = np.concatenate([np.where(rng.uniform(size=n) < 0.8, labels, 1 - labels), rng.integers(0, 2, k)])
        ps = rng.uniform(0.05, 1.0, len(pb))
        per_image.append({'img_id': img_id, 'gt': gt, 'labels': labels, 'crowd': is_crowd,
                          'pbox': pb.astype(np.float32), 'pscore': ps.astype(np.float32), 'plabel': pl})
    cats = [{'id': c, 'name': n} for c, n in zip(CAT_IDS, CLASSES)] + [{'id': 9, 'name': 'unused'}]
    return {'images': images, 'annotations': anns, 'categories': cats}, per_image


def _sample(d, with_gt=True, scale=(2.0, 0.5)):
    s = np.array([scale[0], scale[1], scale[0], scale[1]])
    ds = DetDataSample(metainfo={'img_id': d['img_id'], 'img_path': f"{d['img_id']}.jpg", 'ori_shape': (SIZE, SIZE),
                                 'img_shape': (SIZE // 2, int(SIZE * 1.5)), 'scale_factor': scale})
    ds.pred_instances = InstanceData(bboxes=torch.from_numpy(d['pbox']), scores=torch.from_numpy(d['pscore']),
                                     labels=torch.from_numpy(d['plabel']).long())
    if with_gt:
        # float32 boxes in pipeline pixels; power-of-two scales make the way back exact
        keep, crowd = ~d['crowd'], d['crowd']
        ds.gt_instances = InstanceData(bboxes=torch.from_numpy((d['gt'][keep] * s).astype(np.float32)),
                                       labels=torch.from_numpy(d['labels'][keep]).long())
        ds.ignored_instances = InstanceData(bboxes=torch.from_numpy((d['gt'][crowd] * s).astype(np.float32)),
                                            labels=torch.from_numpy(d['labels'][crowd]).long())
    return ds


def _direct(gt_path, per_image, img_ids):
    dets = []
    for d in per_image:
        if d['img_id'] not in img_ids:
            continue
        for b, s, lab in zip(d['pbox'].astype(np.float64), d['pscore'], d['plabel']):
            dets.append({'image_id': d['img_id'], 'category_id': CAT_IDS[lab],
                         'bbox': [b[0], b[1], b[2] - b[0], b[3] - b[1]], 'score': float(s)})
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(str(gt_path))
        ev = COCOeval(gt, gt.loadRes(dets), 'bbox')
        ev.params.imgIds = sorted(img_ids)
        ev.params.catIds = list(CAT_IDS)
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return ev


def _run(metric, samples):
    evaluator = Evaluator(metric)
    evaluator.dataset_meta = metric.dataset_meta
    evaluator.process(samples)
    return evaluator.evaluate(len(samples))


@pytest.fixture
def coco_file(tmp_path):
    data, per_image = _make_data()
    path = tmp_path / 'gt.json'
    path.write_text(json.dumps(data))
    return path, per_image


def test_file_path_equals_direct_cocoeval(coco_file):
    path, per_image = coco_file
    subset = per_image[:5]  # image 6 is not processed: it must not count
    metric = METRICS.build(dict(type='CocoMetric', ann_file=str(path)))
    metric.dataset_meta = {'classes': CLASSES, 'cat_ids': CAT_IDS}
    res = _run(metric, [_sample(d, with_gt=False) for d in subset])
    ev = _direct(path, per_image, {d['img_id'] for d in subset})
    assert list(res) == [f'coco/{k}' for k in STAT_KEYS]
    for key, value in zip(STAT_KEYS, ev.stats):
        assert abs(res[f'coco/{key}'] - value) < 1e-9, key
    assert 0.0 < res['coco/bbox_mAP'] < 1.0
    # per-class AP from COCOeval's precision array (class 'dog' is category 7 -> index 1)
    table = metric.per_class_table()
    assert table['header'][:3] == ['class', '#gt', 'AP']
    p = ev.eval['precision'][:, :, 1, 0, -1]
    assert table['rows'][1][0] == 'dog'
    assert table['rows'][1][2] == pytest.approx(round(float(p[p > -1].mean()), 4))  # a fraction, as the summary
    curves = metric.class_pr_curves(0.5)
    assert len(curves) == 2 and curves[0]['recall'].shape == (101,)


def test_dataset_ann_file_and_name_lookup(coco_file):
    path, per_image = coco_file
    metric = CocoMetric()
    metric.dataset_meta = {'classes': CLASSES, 'ann_file': str(path)}  # no cat_ids: looked up by name
    res = _run(metric, [_sample(d, with_gt=False) for d in per_image])
    ev = _direct(path, per_image, {d['img_id'] for d in per_image})
    assert res['coco/bbox_mAP'] == pytest.approx(ev.stats[0], abs=1e-9)


def test_in_memory_gt_equals_file(coco_file):
    path, per_image = coco_file
    from_file = CocoMetric(ann_file=str(path))
    from_file.dataset_meta = {'classes': CLASSES, 'cat_ids': CAT_IDS}
    res_file = _run(from_file, [_sample(d, with_gt=False) for d in per_image])
    in_memory = CocoMetric()
    in_memory.dataset_meta = {'classes': CLASSES, 'cat_ids': CAT_IDS}
    res_mem = _run(in_memory, [_sample(d) for d in per_image])  # crowd box -> ignored_instances -> iscrowd
    for key in res_file:
        assert abs(res_file[key] - res_mem[key]) < 1e-9, key
    # label + 1 as category id without cat_ids gives the same numbers
    plain = CocoMetric()
    plain.dataset_meta = {'classes': CLASSES}
    res_plain = _run(plain, [_sample(d) for d in per_image])
    assert res_plain == pytest.approx(res_mem, abs=1e-12)


def test_format_only_writes_json_and_empty_predictions(tmp_path, coco_file):
    path, per_image = coco_file
    metric = CocoMetric(ann_file=str(path), format_only=True, outfile_prefix=str(tmp_path / 'out' / 'res'))
    metric.dataset_meta = {'classes': CLASSES, 'cat_ids': CAT_IDS}
    assert _run(metric, [_sample(d, with_gt=False) for d in per_image[:2]]) == {}
    dets = json.loads((tmp_path / 'out' / 'res.bbox.json').read_text())
    assert len(dets) == len(per_image[0]['pbox']) + len(per_image[1]['pbox'])
    assert set(dets[0]) == {'image_id', 'bbox', 'score', 'category_id'}
    assert {d['category_id'] for d in dets} <= set(CAT_IDS)
    # no detections at all: zeros, not a pycocotools crash
    empty = dict(per_image[0], pbox=np.zeros((0, 4), np.float32), pscore=np.zeros(0, np.float32),
                 plabel=np.zeros(0, np.int64))
    metric = CocoMetric(ann_file=str(path))
    metric.dataset_meta = {'classes': CLASSES, 'cat_ids': CAT_IDS}
    assert _run(metric, [_sample(empty, with_gt=False)])['coco/bbox_mAP'] == 0.0


def test_errors(tmp_path, coco_file):
    path, per_image = coco_file
    assert CocoMetric(metric=['bbox', 'segm']).metrics == ['bbox', 'segm']  # segm: tests/.../test_det_coco_segm.py
    with pytest.raises(ValueError, match='unknown metric'):
        CocoMetric(metric='proposal')
    with pytest.raises(FileNotFoundError, match='missing.json'):
        CocoMetric(ann_file=str(tmp_path / 'missing.json'))
    with pytest.raises(ValueError, match='outfile_prefix'):
        CocoMetric(format_only=True)
    metric = CocoMetric()
    metric.dataset_meta = {'classes': CLASSES}
    with pytest.raises(ValueError, match='gt_instances'):
        metric.process({}, [_sample(per_image[0], with_gt=False).to_dict()])
    bad = dict(per_image[0], img_id=999)
    metric = CocoMetric(ann_file=str(path))
    metric.dataset_meta = {'classes': CLASSES, 'cat_ids': CAT_IDS}
    with pytest.raises(ValueError, match='999'):
        _run(metric, [_sample(bad, with_gt=False)])
    metric = CocoMetric(ann_file=str(path))
    metric.dataset_meta = {'classes': ('cat', 'cow')}
    with pytest.raises(ValueError, match='cow'):
        _run(metric, [_sample(per_image[0], with_gt=False)])
