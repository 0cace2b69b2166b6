"""LocalizationMetric against the official ActivityNet evaluation (activitynet/ActivityNet ``Evaluation/``,
vendored under tests/video/activitynet_official/ with the patches its README lists).

Each case is one ActivityNet v1.3 ground-truth file (read by ``ActivityNetFeatureDataset`` in ``test_mode``, as an
evaluation set is) and one set of predictions: oars evaluates them with ``LocalizationMetric``, which also writes
the submission JSON files; the official ``ANETproposal`` / ``ANETdetection`` read that ground-truth file and
those submissions. AR at every grid point, the AUC, AP per class and tIoU, mAP per tIoU and the average mAP must
agree to 1e-12. Scores are distinct (tied scores are ordered by numpy's unstable sort in the official code: see
docs/video.md, "Tied scores"); the official code is slow on big inputs (pandas row loops), so the cases are small.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip('pandas')  # the official code's data frames

from video.datasets import ActivityNetFeatureDataset  # noqa: E402
from video.evaluation import LocalizationMetric  # noqa: E402

OFFICIAL_DIR = Path(__file__).parent / 'activitynet_official'
THRESHOLDS = np.linspace(0.5, 0.95, 10)
TOL = 1e-12
trapezoid = getattr(np, 'trapezoid', None) or np.trapz  # the official AUC's np.trapz (renamed in NumPy 2)
# the cases hold zero-length ground truth on purpose (the dataset's warning is tested in test_activitynet_gt_as_written)
pytestmark = pytest.mark.filterwarnings('ignore::video.datasets.activitynet.ZeroLengthSegmentWarning')


def _official():
    """The vendored package, imported under its own name (its modules import each other relatively)."""
    name = 'activitynet_official'
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, OFFICIAL_DIR / '__init__.py',
                                                      submodule_search_locations=[str(OFFICIAL_DIR)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    from activitynet_official.eval_detection import ANETdetection
    from activitynet_official.eval_proposal import ANETproposal
    return ANETproposal, ANETdetection


def _video(duration: float, annotations, subset: str = 'validation') -> dict:
    return {'duration': duration, 'subset': subset, 'url': '', 'resolution': '',
            'annotations': [{'segment': [float(s), float(e)], 'label': lb} for s, e, lb in annotations]}


def _evaluate(tmp_path: Path, database: dict, predictions: dict, max_avg: int = 100):
    """(oars metric after evaluate, its results, official ANETproposal, official ANETdetection).

    ``predictions``: video id -> list of (start, end, score, label name); videos not in the validation subset of
    ``database`` are unknown to the ground truth (oars: samples without ground truth, as a test_mode dataset
    would give for videos without annotations).
    """
    ann = tmp_path / 'gt.json'
    ann.write_text(json.dumps({'version': 'VERSION 1.3', 'taxonomy': [], 'database': database}))
    ds = ActivityNetFeatureDataset(ann_file=str(ann), subset='validation', test_mode=True,
                                   data_prefix={'feature': str(tmp_path)})
    classes = list(ds.metainfo['classes'])
    samples, seen = [], set()
    for i in range(len(ds)):
        info = ds.get_data_info(i)
        samples.append({k: info[k] for k in ('video_name', 'gt_segments', 'gt_labels')})
        seen.add(info['video_name'])
    samples += [{'video_name': v, 'gt_segments': np.zeros((0, 2)), 'gt_labels': np.zeros(0, np.int64)}
                for v in predictions if v not in seen]
    for s in samples:
        rows = [(a, b, c, classes.index(lb)) for a, b, c, lb in predictions.get(s['video_name'], [])]
        s['segments'] = np.asarray(rows, dtype=np.float64).reshape(-1, 4)
        s['proposals'] = s['segments'][:, :3]
    ar_at = (1, 5, 10, 100) if max_avg == 100 else (max_avg,)
    metric = LocalizationMetric(metrics=['AR@AN', 'mAP'], max_avg_proposals=max_avg, ar_at=ar_at,
                                proposal_file=str(tmp_path / 'proposals.json'),
                                detection_file=str(tmp_path / 'detections.json'))
    metric.dataset_meta = ds.metainfo
    metric.process({}, samples)
    out = metric.evaluate(len(samples))
    anet_proposal, anet_detection = _official()
    proposal = anet_proposal(str(ann), str(tmp_path / 'proposals.json'), max_avg_nr_proposals=max_avg,
                             tiou_thresholds=THRESHOLDS, subset='validation', check_status=False)
    proposal.evaluate()
    detection = anet_detection(str(ann), str(tmp_path / 'detections.json'), tiou_thresholds=THRESHOLDS,
                               subset='validation', check_status=False)
    detection.evaluate()
    return metric, out, proposal, detection


def _assert_same(tmp_path: Path, database: dict, predictions: dict, max_avg: int = 100) -> tuple:
    metric, out, proposal, detection = _evaluate(tmp_path, database, predictions, max_avg)
    # AR-AN: the whole curve, every threshold, the AN axis and the AUC (official formula: evaluate() prints it)
    np.testing.assert_allclose(metric.recall, proposal.recall, rtol=0, atol=TOL)
    np.testing.assert_allclose(metric.avg_recall, proposal.avg_recall, rtol=0, atol=TOL)
    np.testing.assert_allclose(metric.proposals_per_video, proposal.proposals_per_video, rtol=0, atol=TOL)
    # the official code prints 100 times this (percent); the suite reports every metric as a fraction 0-1
    auc = float(trapezoid(proposal.avg_recall, proposal.proposals_per_video)) / proposal.proposals_per_video[-1]
    assert out['localization/AUC'] == pytest.approx(auc, rel=0, abs=TOL)
    for k in ((1, 5, 10, 100) if max_avg == 100 else (max_avg,)):
        j = int(np.argmin(np.abs(proposal.proposals_per_video - k)))
        assert out[f'localization/AR@{k}'] == pytest.approx(proposal.avg_recall[j], rel=0, abs=TOL)
    # detection: AP per class (by name: oars's ids are the sorted names, the official ones in order of appearance)
    classes = list(metric.dataset_meta['classes'])
    for name, cidx in detection.activity_index.items():
        np.testing.assert_allclose(metric.ap[:, classes.index(name)], detection.ap[:, cidx], rtol=0, atol=TOL)
    with np.errstate(invalid='ignore'):
        np.testing.assert_allclose(np.nanmean(metric.ap, 1), detection.mAP, rtol=0, atol=TOL)
    for t in (0.5, 0.75, 0.95):
        assert out[f'localization/mAP@{t:g}'] == pytest.approx(detection.mAP[np.isclose(THRESHOLDS, t)][0],
                                                               rel=0, abs=TOL)
    assert out['localization/mAP'] == pytest.approx(detection.average_mAP, rel=0, abs=TOL)
    return out, detection


def _random_case(seed: int) -> tuple[dict, dict]:
    """Videos of 40-200 s with 0-4 segments of 3 classes (some past the end, some [0, 0]), predictions near the
    ground truth (jittered, some outside the video) and at random, with distinct scores; one unknown video."""
    rng = np.random.default_rng(seed)
    labels = ['jump', 'run', 'swim']
    database, predictions = {}, {}
    for v in range(8):
        duration = float(rng.uniform(40, 200))
        anns = []
        for _ in range(int(rng.integers(0, 5))):
            s = float(rng.uniform(0, duration * 0.8))
            anns.append((s, min(s + float(rng.uniform(2, 40)), duration + 0.5), labels[int(rng.integers(3))]))
        if v == 3:
            anns.append((0.0, 0.0, 'run'))  # a zero-length annotation, as the v1.3 file holds
        vid = f'v_{seed}_{v}'
        database[vid] = _video(duration, anns, 'training' if v == 7 else 'validation')
        preds = []
        for s, e, lb in anns:
            for _ in range(int(rng.integers(1, 4))):
                a, b = sorted((s + rng.normal(0, 0.1 * (e - s + 1)), e + rng.normal(0, 0.1 * (e - s + 1))))
                preds.append((float(a), float(b), lb if rng.random() < 0.8 else labels[int(rng.integers(3))]))
        for _ in range(int(rng.integers(0, 12))):
            s = float(rng.uniform(-5, duration))
            preds.append((s, s + float(rng.uniform(1, 50)), labels[int(rng.integers(3))]))
        predictions[vid] = preds
    predictions[f'unknown_{seed}'] = [(1.0, 9.0, 'jump'), (3.0, 30.0, 'run')]
    scores = iter(rng.permutation(sum(len(p) for p in predictions.values())) / 1000.0 + 0.001)
    return database, {v: [(a, b, float(next(scores)), lb) for a, b, lb in p] for v, p in predictions.items()}


@pytest.mark.parametrize('max_avg', [100, 10, 3])
@pytest.mark.parametrize('seed', [0, 1, 2])
def test_random_cases_equal_the_official_evaluation(tmp_path, seed, max_avg):
    # max_avg 10 and 3 cut the proposals (ratio < 1): AR@AN at the cut grid points
    database, predictions = _random_case(seed)
    _assert_same(tmp_path, database, predictions, max_avg)


def test_hand_built_edge_cases_equal_the_official_evaluation(tmp_path):
    database = {
        # tIoUs exactly on thresholds: 50/100, 75/100, 95/100 (and a prediction past the video's end)
        'thr': _video(100.0, [(0, 100, 'jump')]),
        # equal tIoU with two ground truths: [1, 11] has 9/11 with [0, 10] and with [2, 12]; the official order
        # tries the last listed first, so [2, 12] is taken and [0, 10] is left for [0, 10] (tIoU 1)
        'tie': _video(60.0, [(0, 10, 'run'), (2, 12, 'run'), (30, 40, 'run')]),
        # ground truth past the video's end (1 s, within the tolerance) and before its start: scored as written
        # (clipped to the video, the predictions [45, 50] and [0, 5] would have tIoU 1 instead of 5/6 and 5/5.9)
        'past': _video(50.0, [(45, 51, 'jump'), (-0.9, 5, 'run')]),
        # zero-length annotations: the official evaluator keeps them (never matched, they count as positives),
        # one video holds nothing else (it still counts among the videos with ground truth)
        'zero': _video(30.0, [(0, 0, 'jump'), (5, 15, 'jump')]),
        'only_zero': _video(30.0, [(0, 0, 'run')]),
        'empty': _video(20.0, []),  # no annotation: its predictions are false positives
        'no_preds': _video(40.0, [(3, 9, 'jump')]),  # no prediction at all
        'swim_only': _video(45.0, [(10, 20, 'swim')]),  # a class nothing predicts: AP 0
        'other_subset': _video(45.0, [(10, 20, 'jump')], subset='training'),
    }
    predictions = {
        'thr': [(0, 50, 0.91, 'jump'), (0, 75, 0.92, 'jump'), (0, 95, 0.93, 'jump'), (0, 60, 0.55, 'jump'),
                (5, 100, 0.5, 'jump'), (80, 130, 0.2, 'jump')],
        'tie': [(1, 11, 0.9, 'run'), (0, 10, 0.8, 'run'), (30, 38, 0.7, 'run')],
        'past': [(45, 50, 0.85, 'jump'), (0, 5, 0.6, 'run'), (40, 50.5, 0.3, 'run')],
        'zero': [(5, 15, 0.4, 'jump'), (0, 1, 0.45, 'jump')],
        'only_zero': [(0, 2, 0.35, 'run')],
        'empty': [(2, 9, 0.95, 'jump'), (4, 8, 0.15, 'run')],
        'swim_only': [(10, 20, 0.25, 'jump')],
        'unknown': [(0, 10, 0.99, 'run'), (1, 5, 0.05, 'jump')],
    }
    _, detection = _assert_same(tmp_path, database, predictions)
    assert detection.ap[:, detection.activity_index['swim']].tolist() == [0.0] * 10
    _assert_same(tmp_path, database, predictions, max_avg=10)


def test_equal_tiou_takes_the_last_listed_ground_truth(tmp_path):
    # the first prediction has tIoU 9/11 with both gts; listing them in the other order changes which is left for
    # the second one, [0, 10] (tIoU 1 with [0, 10], 8/12 with [2, 12]): both orders equal the official numbers
    preds = {'v': [(1, 11, 0.9, 'a'), (0, 10, 0.8, 'a')]}
    outs = []
    for order in ([(0, 10, 'a'), (2, 12, 'a')], [(2, 12, 'a'), (0, 10, 'a')]):
        outs.append(_assert_same(tmp_path, {'v': _video(30.0, order)}, preds)[0])
    # [2, 12] listed last: taken by the first, [0, 10] by the second (TP at every threshold up to 0.8)
    # [0, 10] listed last: taken by the first, the second matches [2, 12] only up to tIoU 0.65
    assert outs[0]['localization/mAP@0.75'] == 1.0 and outs[1]['localization/mAP@0.75'] == 0.5
