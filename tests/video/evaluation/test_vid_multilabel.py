"""MultiLabelMetric: GAP@k, Hit@1 and mAP on hand-computed cases; per-class AP against a threshold-by-threshold
reference written from scikit-learn's definition (sklearn is not installed here)."""

from __future__ import annotations

import math

import pytest
import torch

from video.evaluation import class_average_precision, global_average_precision, hit_at_one
from video.registry import METRICS
from video.structures import ActionDataSample

# 2 clips, 4 classes (class 3 never positive)
SCORES = torch.tensor([[0.9, 0.8, 0.1, 0.05], [0.3, 0.7, 0.6, 0.2]])
LABELS = torch.tensor([[1, 0, 1, 0], [0, 1, 0, 0]])


def _reference_ap(scores: list[float], labels: list[int]) -> float:
    """AP = sum over distinct thresholds (highest first) of (R_n - R_{n-1}) * P_n."""
    positives = sum(labels)
    ap, prev_recall = 0.0, 0.0
    for t in sorted(set(scores), reverse=True):
        chosen = [y for s, y in zip(scores, labels) if s >= t]
        recall = sum(chosen) / positives
        ap += (recall - prev_recall) * (sum(chosen) / len(chosen))
        prev_recall = recall
    return ap


def test_gap_hand_case():
    # top-2 pairs pooled: 0.9 (hit), 0.8 (miss), 0.7 (hit), 0.6 (miss); 3 true labels (clip 0's class 2 missed)
    assert global_average_precision(SCORES, LABELS, top_k=2) == pytest.approx((1 + 2 / 3) / 3)
    # top-20 > C keeps all 8 pairs: hits at ranks 1, 3 and 7 (0.1, clip 0 class 2)
    assert global_average_precision(SCORES, LABELS) == pytest.approx((1 + 2 / 3 + 3 / 7) / 3)
    assert math.isnan(global_average_precision(SCORES, torch.zeros_like(LABELS)))


def test_hit_at_one_and_class_ap_hand_case():
    assert hit_at_one(SCORES, LABELS) == 1.0
    assert hit_at_one(SCORES, torch.tensor([[0, 1, 0, 0], [0, 1, 0, 0]])) == 0.5
    ap = class_average_precision(SCORES, LABELS)
    assert ap[:3].tolist() == pytest.approx([1.0, 0.5, 0.5])
    assert math.isnan(ap[3])


def test_class_ap_ties_form_one_threshold():
    # threshold 0.5: P 1/2, R 1/2; threshold 0.2: P 2/3, R 1
    ap = class_average_precision(torch.tensor([[0.5], [0.5], [0.2]]), torch.tensor([[1], [0], [1]]))
    assert float(ap[0]) == pytest.approx(0.5 * 0.5 + 0.5 * 2 / 3)


def test_class_ap_matches_reference_on_random_scores_with_ties():
    g = torch.Generator().manual_seed(0)
    scores = torch.randint(0, 6, (40, 7), generator=g).float() / 5  # many ties
    labels = (torch.rand(40, 7, generator=g) < 0.3).long()
    labels[:, 6] = 0
    ap = class_average_precision(scores, labels)
    for c in range(6):
        assert float(ap[c]) == pytest.approx(_reference_ap(scores[:, c].tolist(), labels[:, c].tolist()))
    assert math.isnan(ap[6])


def test_metric_keys_skip_class_without_positives_and_table():
    metric = METRICS.build(dict(type='MultiLabelMetric', gap_top_k=2))
    metric.dataset_meta = {'classes': ('a', 'b', 'c', 'd')}
    samples = []
    for i in range(2):
        ds = ActionDataSample(metainfo={'filename': f'v{i}.mp4'})
        ds.set_gt_label(torch.nonzero(LABELS[i]).reshape(-1).tolist(), num_classes=4, multi_label=True)
        ds.pred_score = SCORES[i]
        samples.append(ds.to_dict())
    metric.process({}, samples)
    res = metric.evaluate(2)
    assert res == {'multilabel/gap': pytest.approx(5 / 9), 'multilabel/hit_at_one': 1.0,
                   'multilabel/mAP': pytest.approx(2 / 3)}  # class d skipped, not counted as 0
    rows = metric.per_class_table()['rows']
    assert rows[0] == ['a', 1, 1.0] and rows[3][:2] == ['d', 0] and math.isnan(rows[3][2])


def test_single_label_gt_is_one_hot_and_errors():
    metric = METRICS.build(dict(type='MultiLabelMetric'))
    ds = ActionDataSample().set_gt_label(1)
    ds.pred_score = torch.tensor([0.2, 0.9, 0.1])
    metric.process({}, [ds.to_dict()])
    assert metric.evaluate(1)['multilabel/mAP'] == 1.0
    ds.set_gt_label(5)
    with pytest.raises(ValueError, match=r'\[5\] are outside 0..2'):
        metric.process({}, [ds.to_dict()])
    with pytest.raises(ValueError, match='gap_top_k'):
        METRICS.build(dict(type='MultiLabelMetric', gap_top_k=0))
