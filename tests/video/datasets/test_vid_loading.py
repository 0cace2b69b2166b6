"""Loading transforms through the datasets: decoded frames in frame_inds order, the reader closed, damaged videos
as DataError naming the file or skipped (counted, listed); feature files read and dequantised as YouTube-8M."""

from __future__ import annotations

import pickle
import shutil
import warnings

import numpy as np
import pytest
from conftest import NUM_FRAMES, frame_index, write_frame_folder

from oars.data.dataset import BadSampleWarning
from oars.errors import DataError
from video.datasets import FeatureDataset, LoadFeatures, RawframeDataset, VideoDataset, dequantize
from video.datasets.loading import uniform_indices
from video.registry import TRANSFORMS

WANTED = [0, 5, 5, 11, 3]
CLASSES = ['a', 'b', 'c']


def _fixed_inds(results: dict) -> dict:
    results['frame_inds'] = np.array(WANTED, dtype=np.int64)
    return results


def _video_pipeline() -> list:
    return [dict(type='VideoInit', backend='pyav'), _fixed_inds, dict(type='VideoDecode')]


def test_video_pipeline_decodes_frame_inds_in_order(tmp_path, index_clip):
    shutil.copy(index_clip, tmp_path / 'clip.mp4')
    (tmp_path / 'list.txt').write_text('clip.mp4 2\n')
    ds = VideoDataset(ann_file='list.txt', data_root=str(tmp_path), classes=CLASSES, pipeline=_video_pipeline())
    out = ds[0]
    assert [frame_index(f) for f in out['imgs']] == WANTED
    assert out['imgs'][1] is not out['imgs'][2]  # a repeated index is copied: in-place transforms stay local
    assert (out['total_frames'], out['original_shape'], out['img_shape'], out['label']) == (NUM_FRAMES, (48, 64),
                                                                                            (48, 64), 2)
    assert out['avg_fps'] == pytest.approx(10.0)
    assert 'video_reader' not in out


def test_rawframe_pipeline_off_by_one(tmp_path):
    write_frame_folder(tmp_path / 'v0', start_index=1, tmpl='img_{:05d}.jpg')
    (tmp_path / 'list.txt').write_text('v0 12 1\n')
    ds = RawframeDataset(ann_file='list.txt', data_root=str(tmp_path), classes=CLASSES,
                         pipeline=[_fixed_inds, dict(type='RawFrameDecode')])
    assert [frame_index(f) for f in ds[0]['imgs']] == WANTED  # JPEG: the grey level survives
    bad = RawframeDataset(ann_file='list.txt', data_root=str(tmp_path), classes=CLASSES, start_index=0,
                          pipeline=[lambda r: {**r, 'frame_inds': np.array([11])}, dict(type='RawFrameDecode')])
    assert frame_index(bad[0]['imgs'][0]) == 10  # start_index 0 on files numbered from 1: one frame early
    with pytest.raises(DataError, match=r'frame 0 of .*v0: .*img_00000\.jpg is not found'):
        RawframeDataset(ann_file='list.txt', data_root=str(tmp_path), classes=CLASSES, start_index=0,
                        pipeline=[lambda r: {**r, 'frame_inds': np.array([0])}, dict(type='RawFrameDecode')])[0]


def _mixed_list(tmp_path, index_clip, bad_files) -> str:
    for k in range(3):
        shutil.copy(index_clip, tmp_path / f'good{k}.mp4')
    lines = [f'good{k}.mp4 {k}' for k in range(3)] + [f'{bad_files["truncated"]} 0', f'{bad_files["notes"]} 1']
    (tmp_path / 'list.txt').write_text('\n'.join(lines) + '\n')
    return str(tmp_path / 'list.txt')


def test_bad_video_is_an_error_naming_the_file(tmp_path, index_clip, bad_files):
    ds = VideoDataset(ann_file=_mixed_list(tmp_path, index_clip, bad_files), data_root=str(tmp_path),
                      classes=CLASSES, pipeline=_video_pipeline())
    with pytest.raises(DataError) as info:
        ds[3]
    msg = str(info.value)
    assert bad_files['truncated'] in msg and 'VideoDataset sample 3' in msg and 'on_bad_sample: skip' in msg


def test_skip_policy_counts_and_lists_the_skipped_videos(tmp_path, index_clip, bad_files):
    ds = VideoDataset(ann_file=_mixed_list(tmp_path, index_clip, bad_files), data_root=str(tmp_path),
                      classes=CLASSES, pipeline=_video_pipeline(), on_bad_video='skip')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        samples = [ds[i] for i in range(len(ds))] + [ds[3], ds[4]]
    assert all([frame_index(f) for f in s['imgs']] == WANTED for s in samples)  # substitutes are good samples
    assert all('good' in s['filename'] for s in samples)
    assert sorted(ds.skipped) == sorted([bad_files['truncated'], bad_files['notes']])
    bad = [w for w in caught if issubclass(w.category, BadSampleWarning)]
    assert len(bad) == 2  # one warning per file, not per try
    assert '1 sample(s) skipped so far' in str(bad[0].message) and bad_files['truncated'] in str(bad[0].message)
    last = str(bad[1].message)
    assert '2 sample(s) skipped so far' in last and bad_files['truncated'] in last and bad_files['notes'] in last


def test_transform_arguments_and_missing_keys():
    with pytest.raises(DataError, match=r"VideoInit: backend must be one of \['pyav', 'torchcodec'\]"):
        TRANSFORMS.build(dict(type='VideoInit', backend='opencv'))
    with pytest.raises(KeyError, match='put VideoInit first'):
        TRANSFORMS.build(dict(type='VideoDecode'))({'frame_inds': np.array([0])})
    with pytest.raises(DataError, match='max_frames must be a positive integer'):
        LoadFeatures(max_frames=0)
    with pytest.raises(DataError, match='modalities must be a non-empty list'):
        LoadFeatures(modalities='rgb')


def test_dequantize_matches_youtube8m_by_hand():
    q = np.array([0, 128, 255], dtype=np.uint8)
    # YouTube-8M Dequantize(feat, max=2, min=-2): feat * 4/255 + (4/512 - 2)
    expected = np.array([-1.9921875, 128 * 4 / 255 - 1.9921875, 255 * 4 / 255 - 1.9921875], dtype=np.float32)
    out = dequantize(q)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-6)
    assert out[1] == pytest.approx(0.015655637, abs=1e-6)  # float32 after the cancellation
    np.testing.assert_allclose(dequantize(np.array([255], np.uint8), -1.0, 1.0), [1.00390625], atol=1e-7)


def _feature_files(tmp_path, t: int = 40) -> str:
    rgb = np.arange(t * 4, dtype=np.int64).reshape(t, 4) % 256
    np.savez(tmp_path / 'a.npz', rgb=rgb.astype(np.uint8), audio=np.full((t, 2), 255, np.uint8))
    with open(tmp_path / 'b.pkl', 'wb') as f:
        pickle.dump({'rgb': np.ones((5, 4), np.float64), 'audio': np.zeros((5, 2), np.float32)}, f)
    np.savez(tmp_path / 'c.npz', rgb=np.zeros((5, 4), np.uint8), audio=np.zeros((6, 2), np.uint8))
    (tmp_path / 'd.npz').write_bytes(b'not a zip')
    (tmp_path / 'list.txt').write_text('a.npz 0 1\nb.pkl 2\nc.npz 0\nd.npz 1\ne.npz 2\n')
    return str(tmp_path / 'list.txt')


def test_load_features_dequantises_caps_and_samples(tmp_path):
    ann = _feature_files(tmp_path, t=40)
    ds = FeatureDataset(ann_file=ann, data_root=str(tmp_path), classes=CLASSES, multi_label=True,
                        pipeline=[dict(type='LoadFeatures', max_frames=8, test_mode=True)])
    out = ds[0]
    assert set(out['features']) == {'rgb', 'audio'} and out['label'] == [0, 1]
    assert (out['num_frames'], out['total_frames']) == (8, 40)
    np.testing.assert_array_equal(out['feature_inds'], [2, 7, 12, 17, 22, 27, 32, 37])  # segment centres
    rgb = out['features']['rgb']
    assert rgb.dtype == np.float32 and rgb.shape == (8, 4)
    np.testing.assert_allclose(rgb[1, 0], (7 * 4 % 256) * 4 / 255 - 1.9921875, atol=1e-6)
    np.testing.assert_allclose(out['features']['audio'], 2.0078125, atol=1e-6)
    pkl = ds[1]  # float pickle: as it is, no capping needed
    assert pkl['num_frames'] == 5 and pkl['features']['rgb'].dtype == np.float32
    np.testing.assert_array_equal(pkl['features']['rgb'], 1.0)
    for idx, match in ((2, r'c.npz: the modalities have different numbers of frames'),
                       (3, r'cannot read feature file .*d.npz'), (4, r'feature file not found: .*e.npz')):
        with pytest.raises(DataError, match=match):
            ds[idx]
    with pytest.raises(DataError, match=r"a.npz: no \['flow'\] features \(the file has \['audio', 'rgb'\]\)"):
        LoadFeatures(modalities=['rgb', 'flow'])({'filename': str(tmp_path / 'a.npz')})


def test_uniform_indices_train_random_within_segments_test_deterministic():
    rng = np.random.default_rng(0)
    test = uniform_indices(300, 32, test_mode=True)
    np.testing.assert_array_equal(test, uniform_indices(300, 32, test_mode=True))
    edges = np.arange(33) * 300 / 32  # segment k is [edges[k], edges[k + 1])
    draws = np.stack([uniform_indices(300, 32, test_mode=False, rng=rng) for _ in range(50)])
    assert (draws >= np.floor(edges[:-1])).all() and (draws <= np.ceil(edges[1:]) - 1).all()
    assert len({tuple(d) for d in draws}) > 40  # training draws differ
    assert (np.diff(test) > 0).all() and test[0] >= 0 and test[-1] <= 299


def test_registry_built_tsm_pipeline_decodes_what_sample_frames_chose(tmp_path, index_clip):
    pytest.importorskip('video.transforms.sampling')
    import video.transforms  # noqa: F401 - registers SampleFrames, FormatShape, PackActionInputs

    shutil.copy(index_clip, tmp_path / 'clip.mp4')
    (tmp_path / 'list.txt').write_text('clip.mp4 1\n')
    pipeline = [dict(type='VideoInit'), dict(type='SampleFrames', clip_len=1, num_clips=8, test_mode=True),
                dict(type='VideoDecode'), dict(type='FormatShape', input_format='NCHW'), dict(type='PackActionInputs')]
    ds = VideoDataset(ann_file='list.txt', data_root=str(tmp_path), classes=CLASSES, pipeline=pipeline, test_mode=True)
    out = ds[0]
    inds = out['data_samples'].metainfo['frame_inds']
    assert out['inputs'].shape == (8, 3, 48, 64)
    bgr = out['inputs'].permute(0, 2, 3, 1).numpy()
    assert [frame_index(f) for f in bgr] == list(inds)
    assert out['data_samples'].gt_label.tolist() == [1]
