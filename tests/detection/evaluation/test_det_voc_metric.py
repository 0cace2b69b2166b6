"""VOC AP: hand-computed 11-point and area APs (with a difficult box), the vectorised matching against a
plain loop, and VOCMetric through mmengine's Evaluator (ground truth scaled back to original pixels)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from mmengine.evaluator import Evaluator
from mmengine.structures import InstanceData

from detection.evaluation import VOCMetric, average_precision, eval_ap, match_image
from detection.registry import METRICS
from detection.structures import DetDataSample

CLASSES = ('cat', 'dog', 'bird')

# one image, class 0: A and B are gt, D is difficult
GT = {'bboxes': np.array([[0, 0, 10, 10], [20, 0, 30, 10]], float), 'labels': np.array([0, 0]),
      'ignore_bboxes': np.array([[40, 0, 50, 10]], float), 'ignore_labels': np.array([0])}
PRED = {'bboxes': np.array([[0, 0, 10, 10],      # 0.9 on A: TP
                            [0, 0, 10, 10],      # 0.8 on A again: FP (duplicate)
                            [40, 0, 50, 10],     # 0.7 on difficult D: neither
                            [60, 60, 70, 70],    # 0.6 on nothing: FP
                            [20, 0, 30, 10],     # 0.5 on B: TP
                            [60, 0, 70, 10]],    # 0.4 class 1 (no gt of class 1): FP
                           float),
        'scores': np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4]), 'labels': np.array([0, 0, 0, 0, 0, 1])}
# class 0 curve (ignored left out): TP FP FP TP -> recall .5 .5 .5 1, precision 1 .5 .333 .5
AREA_AP = 0.5 * 1.0 + 0.5 * 0.5
ELEVEN_AP = (6 * 1.0 + 5 * 0.5) / 11


def test_match_image_voc_rule():
    perm = np.array([3, 0, 5, 2, 4, 1])  # input order must not matter
    pred = {k: v[perm] for k, v in PRED.items()}
    m = match_image(pred, GT, (0.5,))
    tp = np.array([True, False, False, False, True, False])[perm]
    fp = np.array([False, True, False, True, False, True])[perm]
    assert m['tp'][0].tolist() == tp.tolist()
    assert m['fp'][0].tolist() == fp.tolist()
    assert m['gt_hit'][0].tolist() == [True, True]


def test_hand_computed_ap():
    rec = {'pred': PRED, 'gt': GT}
    for mode, expected in (('area', AREA_AP), ('11points', ELEVEN_AP)):
        res = eval_ap([rec], 3, (0.5,), mode)
        assert res['ap'][0, 0] == pytest.approx(expected, abs=1e-12)
        assert math.isnan(res['ap'][0, 1]) and math.isnan(res['ap'][0, 2])  # no gt: no AP
        assert res['map'][0] == pytest.approx(expected, abs=1e-12)
        assert res['num_gts'].tolist() == [2, 0, 0] and res['num_dets'].tolist() == [5, 1, 0]
    curve = eval_ap([rec], 3)['curves'][0][0]
    np.testing.assert_allclose(curve['recall'], [0.5, 0.5, 0.5, 1.0])
    np.testing.assert_allclose(curve['precision'], [1, 0.5, 1 / 3, 0.5])


def test_average_precision_edge_cases():
    assert average_precision(np.array([]), np.array([])) == 0.0
    assert average_precision(np.array([1.0]), np.array([1.0]), '11points') == pytest.approx(1.0)
    # recall only reaches 0.45: 11-point counts t = 0 .. 0.4 (5 of 11)
    assert average_precision(np.array([0.45]), np.array([1.0]), '11points') == pytest.approx(5 / 11)
    assert average_precision(np.array([0.45]), np.array([1.0]), 'area') == pytest.approx(0.45)
    with pytest.raises(ValueError, match='mode'):
        average_precision(np.array([1.0]), np.array([1.0]), 'voc')


def _loop_match(pred, gt, thr):
    """Reference: the VOC devkit loop, one detection at a time."""
    boxes = np.concatenate([gt['bboxes'], gt['ignore_bboxes']])
    labels = np.concatenate([gt['labels'], gt['ignore_labels']])
    ignored = np.arange(len(labels)) >= len(gt['labels'])
    tp, fp = np.zeros(len(pred['scores']), bool), np.zeros(len(pred['scores']), bool)
    used = np.zeros(len(labels), bool)
    for i in np.argsort(-pred['scores'], kind='stable'):
        best, best_iou = -1, -1.0
        for j in range(len(labels)):
            if labels[j] != pred['labels'][i]:
                continue
            a, b = pred['bboxes'][i], boxes[j]
            iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
            ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
            inter = iw * ih
            iou = inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)
            if iou > best_iou:
                best, best_iou = j, iou
        if best_iou >= thr:
            if ignored[best]:
                continue
            if not used[best]:
                tp[i] = used[best] = True
            else:
                fp[i] = True
        else:
            fp[i] = True
    return tp, fp


def _random_boxes(rng, n, size=100.0):
    xy = rng.uniform(0, size * 0.7, (n, 2))
    wh = rng.uniform(5, size * 0.3, (n, 2))
    return np.concatenate([xy, xy + wh], 1)


def test_vectorised_matching_equals_loop():
    rng = np.random.default_rng(0)
    for _ in range(30):
        n, m, k = rng.integers(0, 6), rng.integers(0, 3), rng.integers(0, 15)
        gt = {'bboxes': _random_boxes(rng, n), 'labels': rng.integers(0, 2, n),
              'ignore_bboxes': _random_boxes(rng, m), 'ignore_labels': rng.integers(0, 2, m)}
        base = np.concatenate([gt['bboxes'], gt['ignore_bboxes']])
        near = base[rng.integers(0, len(base), k)] + rng.normal(0, 3, (k, 4)) if len(base) else _random_boxes(rng, k)
        pred = {'bboxes': near, 'scores': rng.uniform(size=k), 'labels': rng.integers(0, 2, k)}
        m_vec = match_image(pred, gt, (0.3, 0.5, 0.7))
        for t, thr in enumerate((0.3, 0.5, 0.7)):
            tp, fp = _loop_match(pred, gt, thr)
            assert m_vec['tp'][t].tolist() == tp.tolist()
            assert m_vec['fp'][t].tolist() == fp.tolist()


def _sample(img_id, pred, gt, scale=(2.0, 2.0)):
    """A DetDataSample's to_dict(): gt in pipeline pixels (original * scale), predictions in original pixels."""
    s = np.array([scale[0], scale[1], scale[0], scale[1]])
    ds = DetDataSample(metainfo={'img_id': img_id, 'img_path': f'{img_id}.jpg', 'ori_shape': (80, 80),
                                 'img_shape': (160, 160), 'scale_factor': scale})
    ds.gt_instances = InstanceData(bboxes=torch.tensor(gt['bboxes'] * s, dtype=torch.float32),
                                   labels=torch.tensor(gt['labels'], dtype=torch.int64))
    ds.ignored_instances = InstanceData(bboxes=torch.tensor(gt['ignore_bboxes'] * s, dtype=torch.float32),
                                        labels=torch.tensor(gt['ignore_labels'], dtype=torch.int64))
    ds.pred_instances = InstanceData(bboxes=torch.tensor(pred['bboxes'], dtype=torch.float32),
                                     scores=torch.tensor(pred['scores'], dtype=torch.float32),
                                     labels=torch.tensor(pred['labels'], dtype=torch.int64))
    return ds


def test_voc_metric_through_evaluator():
    # second image: class 2 gt, found by a detection with IoU 0.6 (TP at 0.5, FP at 0.75)
    gt2 = {'bboxes': np.array([[0, 0, 10, 10]], float), 'labels': np.array([2]),
           'ignore_bboxes': np.zeros((0, 4)), 'ignore_labels': np.zeros(0, int)}
    pred2 = {'bboxes': np.array([[0, 0, 10, 6]], float), 'scores': np.array([0.9]), 'labels': np.array([2])}
    evaluator = Evaluator(METRICS.build(dict(type='VOCMetric', iou_thr=[0.5, 0.75], eval_mode='area')))
    evaluator.dataset_meta = {'classes': CLASSES}
    evaluator.process([_sample(1, PRED, GT), _sample(2, pred2, gt2)])
    res = evaluator.evaluate(2)
    ap50 = (AREA_AP + 1.0) / 2
    # at 0.75, class 0 keeps A (exact) and B (exact): same curve; class 2 gets AP 0
    ap75 = (AREA_AP + 0.0) / 2
    assert res['pascal_voc/AP50'] == pytest.approx(ap50)
    assert res['pascal_voc/AP75'] == pytest.approx(ap75)
    assert res['pascal_voc/mAP'] == pytest.approx((ap50 + ap75) / 2)
    table = evaluator.metrics[0].per_class_table()
    assert table['header'] == ['class', '#gt', '#dets', 'AP50', 'AP75']
    assert table['rows'][0] == ['cat', 2, 5, 0.75, 0.75]  # fractions 0-1, as the summary
    assert table['rows'][1][:3] == ['dog', 0, 1] and math.isnan(table['rows'][1][3])
    assert table['rows'][2] == ['bird', 1, 1, 1.0, 0.0]
    assert table['caption'] == 'all metrics are fractions 0–1'


def test_voc_metric_default_11points_and_errors():
    metric = VOCMetric()
    metric.dataset_meta = {'classes': CLASSES}
    metric.process({}, [_sample(1, PRED, GT).to_dict()])
    res = metric.evaluate(1)
    assert res == pytest.approx({'pascal_voc/AP50': ELEVEN_AP, 'pascal_voc/mAP': ELEVEN_AP})
    with pytest.raises(ValueError, match='eval_mode'):
        VOCMetric(eval_mode='integral')
    with pytest.raises(ValueError, match='iou_thr'):
        VOCMetric(iou_thr=1.5)
    with pytest.raises(RuntimeError, match='after evaluate'):
        VOCMetric().per_class_table()
