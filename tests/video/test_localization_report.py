"""The random-segment baseline and the localisation report's numbers (no model: hand-made records)."""

from __future__ import annotations

import numpy as np
import pytest

from video.engine.localization_records import summarize, timeline_picture, video_recall
from video.engine.localization_report import build_sections, compare, comparison_line
from video.localization.baseline import random_baseline, random_segments, video_rng


def _records(perfect: bool) -> list[dict]:
    rng = np.random.default_rng(1)
    out = []
    for k in range(6):
        duration = 30.0
        gt = np.array([[3.0 + k, 6.0 + k], [20.0, 22.5]])
        props = np.concatenate([gt, [[0.9], [0.8]]], axis=1) if perfect else np.zeros((0, 3))
        noise = np.sort(rng.uniform(0, duration, (20, 2)), axis=1)
        props = np.concatenate([props, np.concatenate([noise, rng.uniform(0, 0.5, (20, 1))], axis=1)])
        out.append({'name': f'v{k}', 'duration': duration, 'gt': gt, 'gt_labels': np.array([0, 1]),
                    'proposals': props[np.argsort(-props[:, 2])], 'segments': None, 'video': None})
    return out


def test_baseline_is_seeded_per_video_and_keeps_counts():
    a = random_baseline([('x', 10.0, 5), ('y', 20.0, 3)], seed=0)
    b = random_baseline([('y', 20.0, 3)], seed=0)  # same video alone: same segments
    assert [len(s) for s in a] == [5, 3] and np.array_equal(a[1], b[0])
    assert not np.array_equal(a[0][:3], random_baseline([('x', 10.0, 3)], seed=1)[0])
    segs = random_segments(10.0, 50, video_rng(0, 'z'), num_classes=4)
    assert segs.shape == (50, 4) and (segs[:, 0] <= segs[:, 1]).all() and segs[:, 1].max() <= 10.0
    assert (np.diff(segs[:, 2]) <= 0).all() and set(np.unique(segs[:, 3])) <= {0, 1, 2, 3}
    with pytest.raises(ValueError, match='duration_s must be positive'):
        random_segments(0.0, 1, video_rng(0, 'z'))


def test_perfect_proposals_beat_the_baseline():
    records = _records(perfect=True)
    model, baseline = compare(records, num_classes=2)
    assert model['AR@100'] == pytest.approx(1.0) and model['mAP@0.5'] == pytest.approx(1.0)
    assert model['map_kind'] == 'class-agnostic' and baseline['AR@100'] < 0.8
    assert video_recall(records[0]) == pytest.approx(1.0)
    weak = summarize(_records(perfect=False), 2)
    assert weak['AR@100'] < model['AR@100'] and 'random' in comparison_line(model, baseline)
    # labelled segments: per-class AP, the baseline labels at random
    for r in records:
        r['segments'] = np.concatenate([r['gt'], [[0.9], [0.8]], r['gt_labels'][:, None]], axis=1)
    model, baseline = compare(records, num_classes=2)
    assert model['map_kind'] == 'per-class' and model['mAP'] == pytest.approx(1.0) and baseline['mAP'] < 0.5
    assert model['class_ap'].shape == (2,)
    worst = [('v0', timeline_picture(records[0], ['a', 'b']))]
    titles = [s.title for s in build_sections(records, ['a', 'b'], {'x': 1.0}, model, baseline, worst, 1)]
    assert titles == ['Metrics', 'Model against a random baseline', 'Per-class AP', 'Worst videos (up to 1)']
