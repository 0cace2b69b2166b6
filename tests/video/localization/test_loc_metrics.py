"""LocalizationMetric and video.evaluation.activitynet_eval: AR@AN, AUC and detection mAP on hand-computed cases,
and the vectorised AR-AN curve / AP against loop references written step by step from the official
activitynet/ActivityNet ``eval_proposal.py`` / ``eval_detection.py`` algorithms."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from video.evaluation import (
    LocalizationMetric,
    average_recall_vs_num_proposals,
    detection_average_precision,
    interpolated_ap,
    segment_iou,
)
from video.registry import METRICS
from video.structures import ActionDataSample

THR = np.linspace(0.5, 0.95, 10)

# Video A: one gt [10, 35] (class 0). Video B: gts [0, 10] (class 1) and [50, 70] (class 0).
GT = {'A': (np.array([[10.0, 35.0]]), np.array([0])),
      'B': (np.array([[0.0, 10.0], [50.0, 70.0]]), np.array([1, 0]))}
# Proposals (start, end, score); none of the tIoUs sits on a threshold:
#   A: [10, 35] tIoU 1.0 (all 10 thresholds); [12, 35] tIoU 23/25 = 0.92 (0.5..0.9: 9 thresholds)
#   B: [0, 7.2] with gt [0, 10]: tIoU 0.72 (0.5..0.7: 5); [51.2, 70] with gt [50, 70]: 18.8/20 = 0.94 (9)
PROPOSALS = {'A': np.array([[12.0, 35.0, 0.8], [10.0, 35.0, 0.9]]),  # listed out of score order on purpose
             'B': np.array([[51.2, 70.0, 0.6], [0.0, 7.2, 0.9]])}


def _sample(name: str, proposals=None, segments=None) -> dict:
    seg, lab = GT[name]
    s = ActionDataSample(metainfo=dict(video_name=name, duration_second=100.0, gt_segments=seg))
    s.gt_labels = torch.from_numpy(lab)
    s.gt_bbox = torch.from_numpy((seg / 100.0).astype(np.float32))
    if proposals is not None:
        s.proposals = torch.from_numpy(proposals.astype(np.float32))
    if segments is not None:
        s.segments = segments
    return s.to_dict()


def _evaluate(samples, **kw) -> dict:
    metric = METRICS.build(dict(type='LocalizationMetric', **kw))
    metric.dataset_meta = {'classes': ('jump', 'run')}
    metric.process({}, samples)
    return metric.evaluate(len(samples))


def test_segment_iou_and_interpolated_ap():
    np.testing.assert_allclose(segment_iou([[0, 10], [5, 15], [20, 30]], [[0, 10]]), [[1.0], [1 / 3], [0.0]])
    assert segment_iou([[3, 3]], [[3, 3]])[0, 0] == 0.0  # empty union
    # precision 1, 0.5, 2/3 at recall 1/2, 1/2, 1: envelope 1 up to recall 1/2, then 2/3
    assert interpolated_ap(np.array([1, 0.5, 2 / 3]), np.array([0.5, 0.5, 1.0])) == pytest.approx(0.5 + 0.5 * 2 / 3)


def test_ar_an_hand_case():
    # 2 proposals per video, 4 in all: ratio 100 * 2 / 4 >= 1 keeps all; at grid point k a video keeps
    # int(2 * k / 100 * (100 * 2 / 4)) = k proposals (capped at 2), so AN = k.
    # AN = 1: A's [10, 35] recalls A at 10 thresholds; B's [0, 7.2] recalls gt [0, 10] at 5; gt [50, 70] at 0
    #   -> mean over thresholds of matches / 3 gts = 15 / 30 = 0.5
    # AN >= 2: A 10, B's two gts 5 + 9 -> 24 / 30 = 0.8
    # AUC = (trapezoid over AN 1..100) / 100 = (0.65 + 98 * 0.8) / 100 = 0.7905 (a fraction; official: percent)
    out = _evaluate([_sample('A', PROPOSALS['A']), _sample('B', PROPOSALS['B'])])
    assert out == pytest.approx({'localization/AR@1': 0.5, 'localization/AR@5': 0.8, 'localization/AR@10': 0.8,
                                 'localization/AR@100': 0.8, 'localization/AUC': 0.7905})


def test_ar_an_perfect_proposals():
    # proposals = the gts: 1 for A, 2 for B (3 in all). Grid point k keeps int(K_v * k / 100 * 200 / 3):
    # k = 1 -> A 0 (int 0.67), B 1 (int 1.33): 1 of 3 gts; k >= 2 -> all -> recall 1.
    # AUC = ((1/3 + 1) / 2 + 98) / 100 = 0.98667 (the official curve starts at AN = 1)
    samples = [_sample(n, np.concatenate([GT[n][0], np.full((len(GT[n][0]), 1), 0.5)], 1)) for n in 'AB']
    out = _evaluate(samples, prefix='loc')
    assert out['loc/AR@1'] == pytest.approx(1 / 3)
    assert out['loc/AR@5'] == out['loc/AR@100'] == 1.0
    assert out['loc/AUC'] == pytest.approx(((1 / 3 + 1) / 2 + 98) / 100)


def test_detection_map_hand_case():
    # class 0 (npos 2): A [10, 35] 0.9 TP (tIoU 1); B [51.2, 70] 0.8 TP up to 0.9, FP at 0.95 (tIoU 0.94);
    #   A [12, 35] 0.7 FP (A's gt already taken). t <= 0.9: P 1, 1, 2/3 at R 1/2, 1, 1 -> AP 1;
    #   t = 0.95: TP, FP, FP -> R 1/2 with P 1 -> AP 0.5
    # class 1 (npos 1): A [0, 10] 0.95 FP (no class-1 gt in A); B [0, 7.2] 0.6 TP up to 0.7 (tIoU 0.72):
    #   t <= 0.7: P 0, 1/2 at R 0, 1 -> AP 0.5; t >= 0.75: AP 0
    # per threshold: 0.5..0.7 (5): 0.75; 0.75..0.9 (4): 0.5; 0.95: 0.25 -> mAP = (3.75 + 2 + 0.25) / 10 = 0.6
    dets = {'A': np.array([[10, 35, 0.9, 0], [12, 35, 0.7, 0], [0, 10, 0.95, 1]]),
            'B': np.array([[51.2, 70, 0.8, 0], [0, 7.2, 0.6, 1]])}
    out = _evaluate([_sample(n, PROPOSALS[n], dets[n]) for n in 'AB'], metrics=['AR@AN', 'mAP'])
    assert out['localization/mAP@0.5'] == pytest.approx(0.75)
    assert out['localization/mAP@0.75'] == pytest.approx(0.5)
    assert out['localization/mAP@0.95'] == pytest.approx(0.25)
    assert out['localization/mAP'] == pytest.approx(0.6)
    perfect = {n: np.concatenate([GT[n][0], np.ones((len(GT[n][0]), 1)), GT[n][1][:, None]], 1) for n in 'AB'}
    out = _evaluate([_sample(n, segments=perfect[n]) for n in 'AB'], metrics='mAP')
    assert out == pytest.approx({'localization/mAP@0.5': 1.0, 'localization/mAP@0.75': 1.0,
                                 'localization/mAP@0.95': 1.0, 'localization/mAP': 1.0})


def test_detection_matches_the_highest_tiou_free_gt():
    # gts [0, 10] and [8, 20]; [8, 19] (0.9) overlaps both and takes [8, 20] (tIoU 11/12 against 2/19), so
    # [0, 10] (0.8) is left for the second detection: both TP -> AP 1 at every threshold up to 0.9
    ap = detection_average_precision([np.array([[0, 10], [8, 20]])], [np.array([0, 0])],
                                     [np.array([[8, 19, 0.9, 0], [0, 10, 0.8, 0]])], 1, THR)
    np.testing.assert_allclose(ap[:9, 0], 1.0)


def _reference_ar(gts, props, max_avg=100.0):
    """eval_proposal.average_recall_vs_avg_nr_proposals as loops (videos with gt only)."""
    videos = [i for i, g in enumerate(gts) if len(g)]
    ratio = max_avg * len(videos) / sum(len(p) for p in props)
    scores, total = [], 0
    for i in videos:
        p = props[i][np.argsort(-props[i][:, 2], kind='stable')]
        n = min(int(p.shape[0] * ratio), p.shape[0])
        total += n
        tiou = np.array([[segment_iou(p[j:j + 1, :2], g[None])[0, 0] for j in range(n)] for g in gts[i]])
        scores.append(tiou.reshape(len(gts[i]), n))
    pcn = np.arange(1, 101) / 100.0 * (max_avg * len(videos) / total)
    recall = np.empty((len(THR), 100))
    for r, t in enumerate(THR):
        matches = np.zeros((len(videos), 100))
        for i, score in enumerate(scores):
            counts = np.minimum((score.shape[1] * pcn).astype(int), score.shape[1])
            for j, k in enumerate(counts):
                matches[i, j] = np.count_nonzero((score[:, :k] >= t).sum(1))
        recall[r] = matches.sum(0) / sum(len(s) for s in scores)
    return recall, pcn * (total / len(videos))


def test_ar_an_against_loop_reference_with_cutting():
    # 4 videos with 150, 260, 30 and 80 proposals (one video without gt): ratio 100 * 3 / 520 < 1 cuts them
    rng = np.random.default_rng(0)
    gts, props = [], []
    for n_gt, n_prop in [(2, 150), (3, 260), (0, 30), (1, 80)]:
        s = rng.uniform(0, 80, n_gt)
        gts.append(np.stack([s, s + rng.uniform(2, 20, n_gt)], 1))
        ps = rng.uniform(0, 80, n_prop)
        props.append(np.stack([ps, ps + rng.uniform(1, 25, n_prop), rng.random(n_prop)], 1))
    recall, avg, ppv = average_recall_vs_num_proposals(gts, props, 100, THR)
    ref_recall, ref_ppv = _reference_ar(gts, props)
    np.testing.assert_allclose(recall, ref_recall)
    np.testing.assert_allclose(avg, ref_recall.mean(0))
    np.testing.assert_allclose(ppv, ref_ppv)


def _reference_ap(gts, dets):
    """eval_detection.compute_average_precision_detection as loops (one class)."""
    flat = sorted([(d[2], v, d[:2]) for v, ds in enumerate(dets) for d in ds], key=lambda x: -x[0])
    npos = sum(len(g) for g in gts)
    out = []
    for t in THR:
        lock = [np.zeros(len(g), bool) for g in gts]
        tp = []
        for _, v, seg in flat:
            tiou = segment_iou(seg[None], gts[v])[0] if len(gts[v]) else np.zeros(0)
            hit = 0
            for j in np.argsort(-tiou, kind='stable'):
                if tiou[j] < t:
                    break
                if not lock[v][j]:
                    lock[v][j], hit = True, 1
                    break
            tp.append(hit)
        tp = np.array(tp, float)
        tpc, fpc = np.cumsum(tp), np.cumsum(1 - tp)
        out.append(interpolated_ap(tpc / (tpc + fpc), tpc / npos))
    return np.array(out)


def test_detection_ap_against_loop_reference():
    rng = np.random.default_rng(1)
    gts, dets = [], []
    for n_gt in (3, 0, 5):
        s = rng.uniform(0, 50, n_gt)
        gts.append(np.stack([s, s + rng.uniform(3, 15, n_gt)], 1))
        # detections near the gts (so that every threshold sees matches) and some at random
        near = gts[-1][rng.integers(0, max(n_gt, 1), 12) % max(n_gt, 1)] if n_gt else np.zeros((0, 2))
        near = near + rng.normal(0, 1.0, near.shape)
        rand = rng.uniform(0, 50, (6, 1)) + np.array([[0.0, 8.0]])
        seg = np.concatenate([near, rand])
        dets.append(np.concatenate([np.sort(seg, 1), rng.random((len(seg), 1)), np.zeros((len(seg), 1))], 1))
    ap = detection_average_precision(gts, [np.zeros(len(g), int) for g in gts], dets, 1, THR)[:, 0]
    np.testing.assert_allclose(ap, _reference_ap(gts, [d[:, :3] for d in dets]))
    assert 0 < ap[-1] < ap[0] <= 1


def test_missing_predictions_and_bad_settings_are_clear():
    metric = LocalizationMetric()
    with pytest.raises(KeyError, match="A has no 'proposals'"):
        metric.process({}, [_sample('A')])
    with pytest.raises(KeyError, match="A has no 'segments'"):
        LocalizationMetric(metrics='mAP').process({}, [_sample('A', PROPOSALS['A'])])
    with pytest.raises(ValueError, match='AR@7 is not on the AR-AN grid'):
        LocalizationMetric(max_avg_proposals=30, ar_at=(7,))  # grid 0.3, 0.6, ..., 30
    with pytest.raises(ValueError, match='mAP@0.3 needs 0.3 among tiou_thresholds'):
        LocalizationMetric(map_at=(0.3,))
    with pytest.raises(ValueError, match='proposals must be finite floats'):
        metric.process({}, [_sample('A', np.array([[1.0, 2.0]]))])


def test_mmaction_proposal_list_and_submission_files(tmp_path):
    # MMAction2's proposal_list form gives the same numbers; the submission files hold what the official code reads
    as_list = {n: [{'segment': [float(r[0]), float(r[1])], 'score': float(r[2])} for r in PROPOSALS[n]] for n in 'AB'}
    dets = {'A': np.array([[10, 35, 0.9, 0]]), 'B': np.array([[0, 10, 0.5, 1]])}
    samples = [_sample(n, segments=dets[n]) for n in 'AB']
    for s in samples:
        s['proposals'] = as_list[s['video_name']]
    out = _evaluate(samples, metrics=['AR@AN', 'mAP'], proposal_file=str(tmp_path / 'p.json'),
                    detection_file=str(tmp_path / 'd.json'))
    assert out['localization/AR@1'] == pytest.approx(0.5) and out['localization/AUC'] == pytest.approx(0.7905)
    assert out['localization/mAP'] == pytest.approx(0.75)  # class 0: B's [50, 70] missed -> AP 0.5; class 1: 1
    sub = json.loads((tmp_path / 'p.json').read_text())
    assert sub['version'] == 'VERSION 1.3' and sub['results']['A'][1] == {'segment': [10.0, 35.0], 'score': 0.9}
    det = json.loads((tmp_path / 'd.json').read_text())
    assert det['results']['B'] == [{'segment': [0.0, 10.0], 'score': 0.5, 'label': 'run'}]
