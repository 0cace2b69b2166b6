"""ActivityNetFeatureDataset and the localisation pipeline on a tiny JSON with features written in tmp_path: the
samples, the temporal rescaling (np.interp per channel), and one clear DataError per bad input naming the
annotation or feature file and the video id."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from oars.errors import DataError
from video.datasets import ActivityNetFeatureDataset
from video.registry import DATASETS, METRICS
from video.transforms.localization import resize_positions, resize_temporal

C = 8  # feature width
PIPELINE = [
    dict(type='LoadLocalizationFeature', feat_dim=C),
    dict(type='ResizeTemporal', temporal_dim=100),
    dict(type='GenerateLocalizationLabels'),
    dict(type='PackLocalizationInputs'),
]


def _database() -> dict:
    return {
        'v_a': {'duration_second': 20.0, 'subset': 'training',
                'annotations': [{'segment': [2.0, 10.0], 'label': 'jump'},
                                {'segment': [12.0, 20.5], 'label': 'run'}]},  # 0.5 s past the end: clipped
        'v_b': {'duration_second': 10.0, 'subset': 'validation',
                'annotations': [{'segment': [0.0, 5.0], 'label': 'run'}]},
        'v_c': {'duration_second': 8.0, 'subset': 'testing', 'annotations': []},
    }


def _write(tmp_path, database: dict, layout: str = 'v1.3', suffix: str = '.npy', lengths=None) -> str:
    if layout == 'v1.3':
        data = {'version': 'VERSION 1.3', 'taxonomy': [], 'database': database}
    elif layout == 'list':
        data = [dict(info, video_name=vid) for vid, info in database.items()]
    else:
        data = database
    ann = tmp_path / 'anet.json'
    ann.write_text(json.dumps(data))
    feats = tmp_path / 'feats'
    feats.mkdir(exist_ok=True)
    rng = np.random.default_rng(0)
    for k, vid in enumerate(database):
        t = (lengths or {}).get(vid, 30 + 7 * k)
        arr = rng.standard_normal((t, C)).astype(np.float32)
        if suffix == '.npy':
            np.save(feats / f'{vid}.npy', arr)
        else:
            header = ','.join(f'f{i}' for i in range(C))
            np.savetxt(feats / f'{vid}.csv', arr, delimiter=',', header=header, comments='', fmt='%.6f')
    return str(ann)


def _build(tmp_path, ann: str, **kw) -> ActivityNetFeatureDataset:
    cfg = dict(type='ActivityNetFeatureDataset', ann_file=ann, data_prefix={'feature': str(tmp_path / 'feats')},
               pipeline=PIPELINE)
    cfg.update(kw)
    return DATASETS.build(cfg)


def test_samples_subset_and_labels(tmp_path):
    ann = _write(tmp_path, _database())
    ds = _build(tmp_path, ann, subset='training')
    assert ds.metainfo['classes'] == ('jump', 'run')  # every label of the file, sorted
    assert len(ds) == 1
    out = ds[0]
    assert out['inputs'].dtype == torch.float32 and tuple(out['inputs'].shape) == (C, 100)
    s = out['data_samples']
    assert s.video_name == 'v_a' and s.duration_second == 20.0 and s.feature_frame is None
    np.testing.assert_allclose(s.gt_bbox.numpy(), [[0.1, 0.5], [0.6, 1.0]], rtol=1e-6)
    assert s.gt_bbox.dtype == torch.float32 and s.gt_labels.tolist() == [0, 1]
    np.testing.assert_allclose(s.gt_segments, [[2.0, 10.0], [12.0, 20.5]])  # as written: the metric scores it so

    both = _build(tmp_path, ann, subset=['training', 'validation'], test_mode=True)
    assert [both.get_data_info(i)['video_name'] for i in range(len(both))] == ['v_a', 'v_b']
    # the test subset has no annotations: dropped for training, kept in test_mode
    assert len(_build(tmp_path, ann)) == 2
    test = _build(tmp_path, ann, subset='testing', test_mode=True)
    assert test[0]['data_samples'].gt_bbox.shape == (0, 2)


def test_class_agnostic_and_mmaction_layouts(tmp_path):
    ann = _write(tmp_path, _database(), layout='list', suffix='.csv')
    ds = _build(tmp_path, ann, class_agnostic=True, feature_suffix='.csv')
    assert ds.metainfo['classes'] == ('action',)
    assert ds[0]['data_samples'].gt_labels.tolist() == [0, 0]
    # MMAction2's dict of videos with frame counts: the features cover feature_frame / duration_frame of the video
    db = {'v_x': {'duration_second': 10.0, 'duration_frame': 300, 'feature_frame': 240,
                  'annotations': [{'segment': [2.0, 6.0], 'label': 'jump'}]}}
    ann = _write(tmp_path, db, layout='dict')
    s = _build(tmp_path, ann, classes=['jump'])[0]['data_samples']
    assert s.feature_second == pytest.approx(8.0)
    np.testing.assert_allclose(s.gt_bbox.numpy(), [[0.25, 0.75]], rtol=1e-6)


def test_csv_and_npy_read_the_same_features(tmp_path):
    ann = _write(tmp_path, _database(), suffix='.csv')
    raw = np.loadtxt(tmp_path / 'feats' / 'v_a.csv', delimiter=',', skiprows=1, dtype=np.float32)
    ds = _build(tmp_path, ann, subset='training', feature_suffix='.csv',
                pipeline=[dict(type='LoadLocalizationFeature', feat_dim=C)])
    np.testing.assert_array_equal(ds[0]['features'], raw)
    assert ds[0]['feature_length'] == 30


@pytest.mark.parametrize('align_corners', [False, True])
@pytest.mark.parametrize('length', [1, 7, 100, 250])
def test_resize_equals_np_interp_per_channel(length, align_corners):
    feat = np.random.default_rng(length).standard_normal((length, 5)).astype(np.float32)
    out = resize_temporal(feat, 100, align_corners)
    if align_corners:
        pos = np.linspace(0, length - 1, 100)
    else:  # step j centred at (j + 0.5) / 100 of the video, snippet t at (t + 0.5) / length
        pos = np.clip((np.arange(100) + 0.5) * length / 100 - 0.5, 0, length - 1)
    np.testing.assert_allclose(resize_positions(length, 100, align_corners), pos)
    ref = np.stack([np.interp(pos, np.arange(length), feat[:, c]) for c in range(5)], 1)
    assert out.shape == (100, 5) and out.dtype == np.float32
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    if length == 100 and not align_corners:
        np.testing.assert_array_equal(out, feat)  # the identity at the same length


def _bad(database_edit) -> dict:
    db = _database()
    database_edit(db)
    return db


@pytest.mark.parametrize('edit, needle', [
    (lambda db: db['v_b']['annotations'].append({'segment': [4.0, 12.5], 'label': 'run'}), 'outside the video'),
    (lambda db: db['v_b']['annotations'].append({'segment': [-2.0, 3.0], 'label': 'run'}), 'outside the video'),
    (lambda db: db['v_b']['annotations'].append({'segment': [5.0, 4.0], 'label': 'run'}), 'end < start'),
    (lambda db: db['v_b']['annotations'].append({'segment': [5.0], 'label': 'run'}), "'segment'"),
    (lambda db: db['v_b'].update(duration_second=-1), 'duration_second'),
])
def test_bad_annotations_name_file_and_video(tmp_path, edit, needle):
    ann = _write(tmp_path, _bad(edit))
    with pytest.raises(DataError) as err:
        _build(tmp_path, ann)
    assert needle in str(err.value) and ann in str(err.value) and 'v_b' in str(err.value)


def test_unknown_label_names_file_video_and_classes(tmp_path):
    ann = _write(tmp_path, _database())
    with pytest.raises(DataError, match=r"v_a annotation 1: label 'run' is not one of the 1 classes \['jump'\]") as err:
        _build(tmp_path, ann, classes=['jump'])
    assert ann in str(err.value)


@pytest.mark.parametrize('text', ['', '{"database": {}}', '[1, 2]', '{"database": {"v": 3}}', '{not json'])
def test_empty_or_malformed_json(tmp_path, text):
    ann = tmp_path / 'anet.json'
    ann.write_text(text)
    with pytest.raises(DataError) as err:
        _build(tmp_path, str(ann), classes=['a'])
    assert str(ann) in str(err.value)


def test_subset_on_a_file_without_subsets(tmp_path):
    ann = _write(tmp_path, {'v_x': {'duration_second': 5.0, 'annotations': []}}, layout='dict')
    with pytest.raises(DataError, match="v_x: no 'subset' field"):
        _build(tmp_path, ann, classes=['a'], subset='training', test_mode=True)


def test_missing_or_wrong_width_feature_file(tmp_path):
    ann = _write(tmp_path, _database())
    (tmp_path / 'feats' / 'v_b.npy').unlink()
    np.save(tmp_path / 'feats' / 'v_a.npy', np.zeros((30, C + 1), np.float32))
    ds = _build(tmp_path, ann, test_mode=True, subset=['training', 'validation'])
    with pytest.raises(DataError, match=r'video v_a: .*v_a\.npy has 9 channels .* feat_dim is 8'):
        ds[0]
    with pytest.raises(DataError, match=r'video v_b: feature file not found: .*v_b\.npy'):
        ds[1]
    (tmp_path / 'feats' / 'v_b.npy').write_bytes(b'garbage')
    with pytest.raises(DataError, match=r'video v_b: cannot read feature file .*v_b\.npy'):
        ds[1]


def test_packed_samples_feed_the_metric(tmp_path):
    # the dataset's samples plus perfect proposals (the gt in seconds) through LocalizationMetric: AR@100 = 1
    ds = _build(tmp_path, _write(tmp_path, _database()), test_mode=True, subset=['training', 'validation'])
    metric = METRICS.build(dict(type='LocalizationMetric'))
    metric.dataset_meta = ds.metainfo
    samples = []
    for i in range(len(ds)):
        s = ds[i]['data_samples']
        seconds = np.asarray(s.gt_segments)  # as written: v_a's [12, 20.5] s, past its 20 s end (not clipped)
        s.proposals = torch.from_numpy(np.concatenate([seconds, np.ones((len(seconds), 1))], 1))
        samples.append(s.to_dict())
    metric.process({}, samples)
    assert metric.evaluate(len(samples))['localization/AR@100'] == pytest.approx(1.0)
