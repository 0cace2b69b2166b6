"""AccMetric on hand-computed cases: top-k, ties, mean class accuracy with a class missing, errors."""

from __future__ import annotations

import math

import pytest
import torch

from video.evaluation import AccMetric, top_k_accuracy, true_class_rank
from video.registry import METRICS
from video.structures import ActionDataSample

SCORES = [[0.7, 0.2, 0.1], [0.2, 0.5, 0.3], [0.1, 0.3, 0.6], [0.3, 0.6, 0.1]]
LABELS = [0, 2, 0, 1]  # true-class ranks 1, 2, 3, 1


def _samples(scores, labels, multi_label=False, num_classes=None):
    out = []
    for i, (s, y) in enumerate(zip(scores, labels)):
        ds = ActionDataSample(metainfo={'filename': f'clip{i}.mp4'})
        ds.set_gt_label(y, num_classes=num_classes, multi_label=multi_label)
        ds.pred_score = torch.tensor(s, dtype=torch.float32)
        out.append(ds.to_dict())
    return out


def _evaluate(metric, samples):
    metric.process({}, samples)
    return metric.evaluate(len(samples))


def test_rank_and_topk_hand_case():
    scores, labels = torch.tensor(SCORES), torch.tensor(LABELS)
    assert true_class_rank(scores, labels).tolist() == [1, 2, 3, 1]
    assert top_k_accuracy(scores, labels, [1, 2, 3]) == [0.5, 0.75, 1.0]


def test_ties_go_to_the_lower_class_index_like_argmax():
    scores = torch.full((3, 4), 0.25)
    labels = torch.tensor([0, 2, 3])
    assert true_class_rank(scores, labels).tolist() == [1, 3, 4]
    # top-1 with ties agrees with argmax (pred_label): only the clip of class 0 counts
    assert top_k_accuracy(scores, labels, [1]) == [pytest.approx(1 / 3)]
    assert int(scores[0].argmax()) == 0


def test_metric_keys_values_confusion_and_table():
    metric = METRICS.build(dict(type='AccMetric', topk=[1, 2]))
    metric.dataset_meta = {'classes': ('left', 'right', 'up')}
    res = _evaluate(metric, _samples(SCORES, LABELS))
    assert res == {'acc/top1': 0.5, 'acc/top2': 0.75, 'acc/mean_class_accuracy': pytest.approx(0.5)}
    # rows = true class, columns = top-1 prediction (preds 0, 1, 2, 1)
    assert metric.confusion.tolist() == [[1, 0, 1], [0, 1, 0], [0, 1, 0]]
    table = metric.per_class_table()
    assert table['header'] == ['class', 'clips', 'accuracy']
    assert table['rows'] == [['left', 2, 0.5], ['right', 1, 1.0], ['up', 1, 0.0]]


def test_default_keys_and_top5_with_few_classes():
    metric = AccMetric()
    res = _evaluate(metric, _samples(SCORES, LABELS))
    assert set(res) == {'acc/top1', 'acc/top5', 'acc/mean_class_accuracy'}
    assert res['acc/top5'] == 1.0  # k >= C: 1.0 by definition (logged)


def test_mean_class_accuracy_leaves_out_a_class_without_clips():
    # 4 classes, no clip of class 3 (it is predicted once, wrongly)
    scores = [[0.9, 0.0, 0.0, 0.1], [0.1, 0.8, 0.0, 0.1], [0.1, 0.1, 0.1, 0.7], [0.0, 0.1, 0.9, 0.0]]
    labels = [0, 1, 1, 2]
    metric = AccMetric(topk=1)
    res = _evaluate(metric, _samples(scores, labels))
    # class accuracies 1, 1/2, 1 over the 3 classes present; a 0 for class 3 would give 0.625
    assert res['acc/mean_class_accuracy'] == pytest.approx(2.5 / 3)
    assert res['acc/top1'] == 0.75
    assert math.isnan(metric.per_class_accuracy[3])
    assert metric.per_class_table()['rows'][3][:2] == ['3', 0]


def test_errors_are_clear():
    with pytest.raises(ValueError, match='topk'):
        AccMetric(topk=[1, 0])
    metric = AccMetric()
    with pytest.raises(ValueError, match='MultiLabelMetric'):
        metric.process({}, _samples([[0.5, 0.5, 0.0]], [[0, 1]], multi_label=True, num_classes=3))
    no_pred = ActionDataSample(metainfo={'filename': 'x.mp4'}).set_gt_label(1).to_dict()
    with pytest.raises(KeyError, match="x.mp4.*pred_score"):
        metric.process({}, [no_pred])
    metric = AccMetric()
    metric.dataset_meta = {'classes': ('a', 'b')}
    metric.process({}, _samples(SCORES, LABELS))
    with pytest.raises(ValueError, match='scores 3 classes.*names 2'):
        metric.evaluate(4)
