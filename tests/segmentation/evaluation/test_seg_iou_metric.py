"""IoUMetric and the shared confusion matrix: hand-computed cases and a direct numpy reference."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from mmengine.evaluator import Evaluator
from mmengine.structures import PixelData

from oars.evaluation.confusion import confusion_matrix, per_class_scores
from segmentation.evaluation import IoUMetric
from segmentation.registry import METRICS
from segmentation.structures import SegDataSample

CLASSES = ('a', 'b', 'c', 'd')


def sample_dict(pred: np.ndarray, gt: np.ndarray) -> dict:
    """What mmengine's Evaluator hands to ``process``: ``SegDataSample.to_dict()``."""
    ds = SegDataSample()
    ds.pred_sem_seg = PixelData(data=torch.as_tensor(pred).long()[None])
    ds.gt_sem_seg = PixelData(data=torch.as_tensor(gt).to(torch.uint8)[None])  # uint8, as PackSegInputs packs it
    return ds.to_dict()


def make_metric(**kwargs) -> IoUMetric:
    metric = METRICS.build(dict(type='IoUMetric', **kwargs))
    metric.dataset_meta = {'classes': CLASSES}
    return metric


def test_confusion_matrix_hand_case():
    gt = torch.tensor([[0, 0, 1], [1, 255, 0]])
    pred = torch.tensor([[0, 1, 1], [0, 2, 2]])
    cm = confusion_matrix(pred, gt, 3, ignore_index=255)
    assert cm.tolist() == [[1, 1, 1], [1, 1, 0], [0, 0, 0]]
    assert cm.dtype == torch.int64
    with pytest.raises(ValueError, match=r'target contains values \[7\]'):
        confusion_matrix(pred, torch.full((2, 3), 7), 3)
    with pytest.raises(ValueError, match='prediction contains values'):
        confusion_matrix(torch.full((2, 3), 3), gt, 3, ignore_index=255)
    with pytest.raises(ValueError, match='differ in size'):
        confusion_matrix(pred[:1], gt, 3)


def test_scores_from_confusion():
    cm = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]])
    s = per_class_scores(cm)
    assert s['IoU'][:3].tolist() == pytest.approx([0.25, 1 / 3, 0.0])
    assert math.isnan(s['IoU'][3]) and math.isnan(s['Acc'][2])
    assert s['Dice'][:2].tolist() == pytest.approx([2 / 5, 2 / 4])
    assert s['Fscore'][:3].tolist() == pytest.approx([2 / 5, 2 / 4, 0.0])
    assert s['Precision'][0] == pytest.approx(0.5) and s['Recall'][0] == pytest.approx(1 / 3)


def test_iou_metric_hand_case_with_ignore_and_absent_class():
    metric = make_metric(iou_metrics=['mIoU', 'mDice'])
    gt = np.array([[0, 0, 1], [1, 255, 0]])
    pred = np.array([[0, 1, 1], [0, 2, 2]])
    metric.process({}, [sample_dict(pred, gt)])
    res = metric.evaluate(1)
    # class a: IoU 1/4, Acc 1/3; b: 1/3, 1/2; c: predicted only -> IoU 0, Acc NaN; d: absent -> NaN
    assert res == {'aAcc': 0.4, 'mIoU': round((0.25 + 1 / 3 + 0) / 3, 4), 'mAcc': 0.4167,
                   'mDice': round((2 / 5 + 2 / 4 + 0) / 3, 4)}  # fractions 0-1, as every metric of the suite
    table = metric.per_class_table()
    assert table['header'] == ['class', 'IoU', 'Acc', 'Dice']
    assert table['rows'][0] == ['a', 0.25, 0.3333, 0.4]
    assert table['rows'][2][1] == 0.0 and math.isnan(table['rows'][2][2])
    assert all(math.isnan(v) for v in table['rows'][3][1:])
    assert metric.confusion.tolist()[0] == [1, 1, 1, 0]


def test_nan_to_num_counts_in_the_mean():
    metric = make_metric(nan_to_num=0)
    metric.process({}, [sample_dict(np.array([[0, 1]]), np.array([[0, 1]]))])
    res = metric.evaluate(1)
    assert res['mIoU'] == 0.5 and res['aAcc'] == 1.0  # two perfect classes, two zeros


def numpy_reference(pairs, num_classes, ignore_index):
    inter, union, gt_area, pred_area = (np.zeros(num_classes) for _ in range(4))
    correct = total = 0
    for pred, gt in pairs:
        valid = gt != ignore_index
        correct += ((pred == gt) & valid).sum()
        total += valid.sum()
        for c in range(num_classes):
            p, g = (pred == c) & valid, (gt == c) & valid
            inter[c] += (p & g).sum()
            union[c] += (p | g).sum()
            gt_area[c] += g.sum()
            pred_area[c] += p.sum()
    with np.errstate(invalid='ignore', divide='ignore'):
        iou = np.where(union > 0, inter / union, np.nan)
        acc = np.where(gt_area > 0, inter / gt_area, np.nan)
        dice = np.where(gt_area + pred_area > 0, 2 * inter / (gt_area + pred_area), np.nan)
        prec = np.where(pred_area > 0, inter / pred_area, np.nan)
        f1 = np.where(gt_area + pred_area > 0, 2 * inter / (gt_area + pred_area), np.nan)
    return {'aAcc': correct / total, 'mIoU': np.nanmean(iou), 'mAcc': np.nanmean(acc), 'mDice': np.nanmean(dice),
            'mFscore': np.nanmean(f1), 'mPrecision': np.nanmean(prec), 'mRecall': np.nanmean(acc)}


def test_iou_metric_matches_numpy_on_random_data():
    rng = np.random.default_rng(0)
    metric = make_metric(iou_metrics=['mIoU', 'mDice', 'mFscore'])
    pairs = []
    for h, w in [(17, 23), (32, 8), (5, 40)]:
        gt = rng.integers(0, 4, (h, w))
        gt[rng.random((h, w)) < 0.1] = 255
        pred = np.where(rng.random((h, w)) < 0.6, np.where(gt == 255, 0, gt), rng.integers(0, 3, (h, w)))
        pairs.append((pred, gt))
    metric.process({}, [sample_dict(p, g) for p, g in pairs[:2]])
    metric.process({}, [sample_dict(*pairs[2])])
    res = metric.evaluate(3)
    ref = numpy_reference(pairs, 4, 255)
    assert set(res) == set(ref)
    for k, v in ref.items():
        assert res[k] == pytest.approx(round(v, 4), abs=1e-9), k


def test_through_mmengine_evaluator():
    evaluator = Evaluator(metrics=dict(type='IoUMetric', _scope_='segmentation'))
    evaluator.dataset_meta = {'classes': CLASSES}
    samples = []
    for pred, gt in [(np.array([[0, 1], [2, 3]]), np.array([[0, 1], [2, 2]]))]:
        ds = SegDataSample(metainfo={'img_path': 'x.png'})
        ds.pred_sem_seg = PixelData(data=torch.as_tensor(pred)[None])
        ds.gt_sem_seg = PixelData(data=torch.as_tensor(gt)[None])
        samples.append(ds)
    evaluator.process(samples)
    res = evaluator.evaluate(1)
    # a, b perfect; c: 1 of 2 -> IoU 1/2, Acc 1/2; d: predicted once, never GT -> IoU 0
    assert res == {'aAcc': 0.75, 'mIoU': round((1 + 1 + 0.5 + 0) / 4, 4), 'mAcc': round(2.5 / 3, 4)}


def test_errors():
    with pytest.raises(KeyError, match='mDice'):
        IoUMetric(iou_metrics=['mDicee'])
    metric = IoUMetric()
    with pytest.raises(ValueError, match="dataset_meta\\['classes'\\]"):
        metric.process({}, [sample_dict(np.zeros((2, 2)), np.zeros((2, 2)))])
    metric = make_metric()
    with pytest.raises(ValueError, match='differ in size'):
        metric.process({}, [sample_dict(np.zeros((2, 2)), np.zeros((2, 3)))])
    with pytest.raises(KeyError, match='pred_sem_seg'):
        metric.process({}, [{'gt_sem_seg': {'data': torch.zeros(1, 2, 2)}}])
    with pytest.raises(RuntimeError, match='after evaluate'):
        make_metric().per_class_table()


def random_pairs(n: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(n):
        h, w = rng.integers(3, 12, 2)
        gt = rng.integers(0, 4, (h, w))
        gt[rng.random((h, w)) < 0.1] = 255
        pairs.append((rng.integers(0, 4, (h, w)), gt))
    return pairs


def test_memory_stays_constant_and_sum_equals_per_image_accumulation():
    pairs = random_pairs(300)
    metric = make_metric(iou_metrics=['mIoU', 'mFscore'])
    for start in range(0, len(pairs), 4):
        metric.process({}, [sample_dict(p, g) for p, g in pairs[start:start + 4]])
        assert len(metric.results) <= 1  # was one C x C matrix per image (360 MB per rank for ADE-150)
    per_image = [confusion_matrix(torch.as_tensor(p), torch.as_tensor(g), 4, 255) for p, g in pairs]
    res = metric.evaluate(len(pairs))
    assert torch.equal(metric.confusion, torch.stack(per_image).sum(0))
    assert res == make_metric(iou_metrics=['mIoU', 'mFscore']).compute_metrics(per_image)  # the former way
    assert metric.results == []
    with pytest.raises(ValueError, match='no results'):  # reset: nothing processed since
        metric.evaluate(1)


def test_distributed_ranks_drop_the_samples_the_sampler_repeats(monkeypatch):
    """5 images on 2 ranks: DefaultSampler deals [0, 1, 2, 3, 4, 0] round-robin, so rank 1's last image is a
    repeat of image 0 that mmengine's collect_results(size=5) used to drop from the per-image list."""
    import segmentation.evaluation.iou_metric as mod

    pairs = random_pairs(5, seed=1)
    padded = [*range(5), 0]
    totals = []
    for rank in (0, 1):
        monkeypatch.setattr(mod, 'get_dist_info', lambda r=rank: (r, 2))
        metric = make_metric()
        for i in padded[rank::2]:
            metric.process({}, [sample_dict(*pairs[i])])
        totals.append(metric.rank_confusion(size=5))
    expected = sum(confusion_matrix(torch.as_tensor(p), torch.as_tensor(g), 4, 255) for p, g in pairs)
    assert torch.equal(totals[0] + totals[1], expected)
