"""IoUMetric's per-class IoU / Acc, Dice, F-score and Cohen's kappa against a hand-computed 3-class confusion
matrix, and the per-image mean IoU the report ranks images by."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from mmengine.structures import PixelData

from segmentation.evaluation import cohen_kappa, per_image_miou
from segmentation.registry import METRICS
from segmentation.structures import SegDataSample

# rows: ground truth, columns: prediction (17 pixels)
CM = [[5, 1, 0],
      [2, 3, 1],
      [0, 1, 4]]


def _pixels(cm: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """A 1 x N prediction / GT pair whose confusion matrix is ``cm`` (plus two ignored pixels)."""
    gt, pred = [], []
    for g, row in enumerate(cm):
        for p, n in enumerate(row):
            gt += [g] * n
            pred += [p] * n
    gt += [255, 255]
    pred += [0, 2]
    return np.array([pred]), np.array([gt])


def _sample(pred: np.ndarray, gt: np.ndarray) -> dict:
    ds = SegDataSample()
    ds.pred_sem_seg = PixelData(data=torch.as_tensor(pred).long()[None])
    ds.gt_sem_seg = PixelData(data=torch.as_tensor(gt).to(torch.uint8)[None])
    return ds.to_dict()


def _pct(x: float) -> float:
    """The metric's unit: a fraction 0-1 rounded to 4 decimals (it was percent with 2 before issue 37)."""
    return round(x, 4)


def test_all_scores_against_the_hand_computed_matrix():
    metric = METRICS.build(dict(type='IoUMetric', iou_metrics=['mIoU', 'mDice', 'mFscore', 'Kappa']))
    metric.dataset_meta = {'classes': ('a', 'b', 'c')}
    pred, gt = _pixels(CM)
    # split into two "images": the running sum must give the same matrix
    metric.process({}, [_sample(pred[:, :9], gt[:, :9]), _sample(pred[:, 9:], gt[:, 9:])])
    res = metric.evaluate(2)
    assert metric.confusion.tolist() == CM

    # by hand: tp = (5, 3, 4); GT rows (6, 6, 5); predicted columns (7, 5, 5)
    iou = [5 / 8, 3 / 8, 4 / 6]
    acc = [5 / 6, 3 / 6, 4 / 5]
    dice = [10 / 13, 6 / 11, 8 / 10]
    precision = [5 / 7, 3 / 5, 4 / 5]
    # kappa: p_o = 12/17, p_e = (6*7 + 6*5 + 5*5) / 17^2 = 97/289 -> (204 - 97) / (289 - 97) = 107/192
    p_o, p_e = 12 / 17, (6 * 7 + 6 * 5 + 5 * 5) / 17 ** 2
    kappa = (p_o - p_e) / (1 - p_e)
    assert kappa == pytest.approx(107 / 192)
    assert res == {'aAcc': _pct(12 / 17), 'mIoU': _pct(sum(iou) / 3), 'mAcc': _pct(sum(acc) / 3),
                   'mDice': _pct(sum(dice) / 3), 'mFscore': _pct(sum(dice) / 3),
                   'mPrecision': _pct(sum(precision) / 3), 'mRecall': _pct(sum(acc) / 3), 'Kappa': _pct(kappa)}
    table = metric.per_class_table()
    assert table['header'] == ['class', 'IoU', 'Acc', 'Dice', 'Fscore', 'Precision', 'Recall']
    for row, i, a, d, p in zip(table['rows'], iou, acc, dice, precision):
        assert row[1:] == [_pct(i), _pct(a), _pct(d), _pct(d), _pct(p), _pct(a)]

    # F2 weighs recall: (1 + 4) tp / (4 gt + pred)
    f2 = METRICS.build(dict(type='IoUMetric', iou_metrics=['mFscore'], beta=2.0))
    f2.dataset_meta = metric.dataset_meta
    f2.process({}, [_sample(pred, gt)])
    assert f2.evaluate(1)['mFscore'] == _pct((25 / 31 + 15 / 29 + 20 / 25) / 3)

    with pytest.raises(KeyError, match="unknown metric 'kappa'.*did you mean 'Kappa'"):
        METRICS.build(dict(type='IoUMetric', iou_metrics=['kappa']))


def test_kappa_edge_cases():
    # majority-class guessing: high accuracy, kappa 0
    assert cohen_kappa(torch.tensor([[9, 0], [1, 0]])) == 0.0
    assert cohen_kappa(torch.tensor([[3, 0], [0, 2]])) == 1.0
    assert cohen_kappa(torch.tensor([[0, 2], [3, 0]])) < 0
    assert math.isnan(cohen_kappa(torch.zeros(3, 3, dtype=torch.int64)))
    assert math.isnan(cohen_kappa(torch.tensor([[4, 0], [0, 0]])))  # one class everywhere: undefined


def test_per_image_miou():
    stack = torch.tensor([CM,
                          [[4, 0, 0], [0, 0, 0], [0, 0, 0]],  # only class a, all right
                          [[0, 2, 0], [0, 0, 0], [0, 0, 0]],  # a predicted as b: IoU a = 0, b = 0
                          [[0, 0, 0], [0, 0, 0], [0, 0, 0]]])  # all ignored
    got = per_image_miou(stack)
    assert got[:3].tolist() == pytest.approx([(5 / 8 + 3 / 8 + 4 / 6) / 3, 1.0, 0.0])
    assert math.isnan(got[3])
    with pytest.raises(ValueError, match=r'expected \[N, C, C\]'):
        per_image_miou(torch.zeros(3, 3))
