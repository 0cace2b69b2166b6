"""What the evaluation scores: ActivityNetFeatureDataset keeps ground truth as written (past the video's ends,
zero-length in test_mode) while the training targets are clipped or skipped, reads ActivityNet's own ``duration``
field, and LocalizationMetric warns when most scores are tied (the official evaluator's unstable sort)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from oars.errors import DataError
from video.datasets import ActivityNetFeatureDataset
from video.datasets.activitynet import ZeroLengthSegmentWarning
from video.evaluation import LocalizationMetric, tied_score_fraction
from video.evaluation import localization_metrics as metric_module
from video.transforms.localization import GenerateLocalizationLabels


def _ann(tmp_path, database: dict) -> str:
    path = tmp_path / 'anet.json'
    path.write_text(json.dumps({'version': 'VERSION 1.3', 'taxonomy': [], 'database': database}))
    return str(path)


def _video(annotations, duration: float = 50.0, key: str = 'duration') -> dict:
    return {key: duration, 'subset': 'validation',
            'annotations': [{'segment': list(seg), 'label': 'jump'} for seg in annotations]}


def _build(tmp_path, database: dict, **kw) -> ActivityNetFeatureDataset:
    return ActivityNetFeatureDataset(ann_file=_ann(tmp_path, database), data_prefix={'feature': str(tmp_path)},
                                     **kw)


def _segments(ds) -> dict:
    return {ds.get_data_info(i)['video_name']: ds.get_data_info(i)['gt_segments'].tolist() for i in range(len(ds))}


def test_ground_truth_past_the_video_is_kept_as_written_and_clipped_for_training(tmp_path):
    ds = _build(tmp_path, {'v': _video([(45.0, 50.6), (-0.5, 10.0)], key='duration_second')})
    info = ds.get_data_info(0)
    assert info['gt_segments'].tolist() == [[45.0, 50.6], [-0.5, 10.0]]  # what the metric scores
    target = GenerateLocalizationLabels()(dict(info))
    np.testing.assert_allclose(target['gt_bbox'], [[0.9, 1.0], [0.0, 0.2]], rtol=1e-6)  # what training learns
    with pytest.raises(DataError, match='outside the video'):  # beyond the tolerance it is still an error
        _build(tmp_path, {'v': _video([(45.0, 52.0)])})


def test_zero_length_segments_skipped_for_training_kept_for_evaluation_with_one_warning(tmp_path):
    database = {'a': _video([(0.0, 0.0), (3.0, 9.0)]), 'b': _video([(0.0, 0.0)]), 'c': _video([(1.0, 2.0)])}
    with pytest.warns(ZeroLengthSegmentWarning) as record:
        train = _build(tmp_path, database)
    assert len(record) == 1
    message = str(record[0].message)
    assert '2 zero-length segment(s)' in message and 'in 2 video(s) (a, b)' in message and 'skipped' in message
    assert _segments(train) == {'a': [[3.0, 9.0]], 'c': [[1.0, 2.0]]}  # b has nothing left: dropped for training
    with pytest.warns(ZeroLengthSegmentWarning, match=r'2 zero-length .* kept them as ground truth'):
        test = _build(tmp_path, database, test_mode=True)
    assert _segments(test) == {'a': [[0.0, 0.0], [3.0, 9.0]], 'b': [[0.0, 0.0]], 'c': [[1.0, 2.0]]}
    with warnings.catch_warnings():
        warnings.simplefilter('error', ZeroLengthSegmentWarning)  # none: no warning
        _build(tmp_path, {'c': _video([(1.0, 2.0)])})


def test_reversed_segment_is_an_error_naming_the_video_and_segment(tmp_path):
    with pytest.raises(DataError) as err:
        _build(tmp_path, {'good': _video([(1.0, 2.0)]), 'bad_one': _video([(1.0, 2.0), (9.0, 4.5)])})
    text = str(err.value)
    assert 'bad_one annotation 1' in text and '[9.0, 4.5]' in text and 'end < start' in text and 'anet.json' in text


def test_duration_field_of_the_official_file_is_read(tmp_path):
    assert _build(tmp_path, {'v': _video([(1.0, 2.0)], 30.0)}).get_data_info(0)['duration_second'] == 30.0
    with pytest.raises(DataError, match=r"video v: 'duration_second' \(or 'duration'\) must be a number, got None"):
        _build(tmp_path, {'v': {'subset': 'validation', 'annotations': []}}, test_mode=True, classes=['jump'])
    with pytest.raises(DataError, match="video v: 'duration' must be positive"):
        _build(tmp_path, {'v': _video([], 0.0)}, test_mode=True, classes=['jump'])


def test_tied_score_fraction():
    assert tied_score_fraction([np.array([0.9, 0.8, 0.7]), np.array([0.9])]) == 0.0  # ties count inside a group
    assert tied_score_fraction([np.array([1.0, 1.0, 0.5, 0.2])]) == 0.5
    assert tied_score_fraction([np.ones(3), np.array([0.1, 0.2])]) == 0.6
    assert tied_score_fraction([]) == 0.0


@pytest.mark.parametrize('tied, warned', [(False, []), (True, ['proposals', 'detections'])])
def test_mostly_tied_scores_warn(monkeypatch, tied, warned):
    logged = []
    monkeypatch.setattr(metric_module, 'print_log', lambda msg, **kw: logged.append((msg, kw.get('level'))))
    samples = []
    for v in range(3):
        score = np.ones(4) if tied else np.array([0.9, 0.8, 0.7, 0.6]) - v / 10
        seg = np.array([[0, 10], [2, 12], [20, 30], [25, 35]], float)
        samples.append({'video_name': f'v{v}', 'gt_segments': seg[:2], 'gt_labels': np.zeros(2, np.int64),
                        'proposals': np.c_[seg, score], 'segments': np.c_[seg, score, np.zeros(4)]})
    metric = LocalizationMetric(metrics=['AR@AN', 'mAP'])
    metric.process({}, samples)
    metric.evaluate(len(samples))
    warnings_ = [m for m, level in logged if level is not None]
    assert [w.split(' of the ')[1].split()[0] for w in warnings_] == warned
    if tied:
        assert warnings_[0].startswith('LocalizationMetric: 100% of the proposals share their score with another '
                                       'of the same video')
        assert 'eval_detection.py (mAP)' in warnings_[1]
