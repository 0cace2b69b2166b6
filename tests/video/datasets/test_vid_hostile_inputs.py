"""Files that are not videos, or are too short to be sampled, in a video training list: a still image (PNG, JPEG,
... whatever its suffix; FFmpeg opens one as a one-frame video), a one-frame video, a video shorter than the
config's ``min_frames`` and a feature file are errors naming the file and why, handled by ``on_bad_sample`` /
``on_bad_video`` (error stops, skip counts and lists); ``on_bad_video`` with a wrong value names that key."""

from __future__ import annotations

import pickle
import warnings
from pathlib import Path

import cv2
import numpy as np
import pytest
from conftest import index_frames

from oars.data.dataset import BadSampleWarning
from oars.errors import DataError
from oars_deploy.clips.inputs import sniff_still_image, still_image_demuxer
from video.datasets import FeatureDataset, VideoDataset
from video.datasets.check import check_video, check_video_list
from video.datasets.decoders import PyAVReader, open_video, torchcodec_available
from video.demo_data import write_video
from video.transforms import SampleFrames

CLASSES = ['a', 'b']
STILL = 'is a still image (png), not a video'


def _pipeline(**sample) -> list[dict]:
    return [dict(type='VideoInit'), dict(type='SampleFrames', **{'clip_len': 1, 'num_clips': 4, **sample}),
            dict(type='VideoDecode')]


def _write_image(path: Path, ext: str) -> None:
    """A frame encoded as ``ext`` (e.g. '.png') written under ``path``, whatever its suffix."""
    ok, buf = cv2.imencode(ext, index_frames(1)[0])
    assert ok
    path.write_bytes(buf.tobytes())


@pytest.fixture()
def files(tmp_path, index_clip) -> dict[str, str]:
    """A good 30-frame clip, a PNG named .mp4, a JPEG named .avi, a one-frame and a five-frame H.264 video."""
    _write_image(tmp_path / 'png.mp4', '.png')
    _write_image(tmp_path / 'jpeg.avi', '.jpg')
    write_video(tmp_path / 'one.mp4', index_frames(1))
    write_video(tmp_path / 'five.mp4', index_frames(5))
    out = {name: str(tmp_path / f'{name}.{ext}') for name, ext in
           (('png', 'mp4'), ('jpeg', 'avi'), ('one', 'mp4'), ('five', 'mp4'))}
    return {'good': index_clip, **out}


def _dataset(tmp_path: Path, files: dict[str, str], names: list[str], **kwargs) -> VideoDataset:
    (tmp_path / 'list.txt').write_text(''.join(f'{files[n]} {k % 2}\n' for k, n in enumerate(names)))
    return VideoDataset(ann_file=str(tmp_path / 'list.txt'), classes=CLASSES, pipeline=_pipeline(), **kwargs)


def test_a_still_image_is_no_video_for_either_backend(files):
    for name, kind in (('png', 'png'), ('jpeg', 'jpeg')):
        with pytest.raises(DataError, match=rf'{files[name]} is a still image \({kind}\), not a video: .*\.mp4'):
            PyAVReader(files[name])
    if torchcodec_available():
        with pytest.raises(DataError, match=STILL):
            open_video(files['png'], 'torchcodec')
    with PyAVReader(files['one']) as reader:  # a real one-frame video opens: the sampling refuses it
        assert reader.total_frames == 1


def test_still_images_are_known_by_bytes_and_by_demuxer(tmp_path):
    _write_image(tmp_path / 'ppm.mkv', '.ppm')  # no byte signature listed: FFmpeg's ppm_pipe demuxer tells
    with pytest.raises(DataError, match=r'ppm.mkv is a still image \(ppm\), not a video'):
        PyAVReader(str(tmp_path / 'ppm.mkv'))
    assert sniff_still_image(b'\x89PNG\r\n\x1a\n\0\0\0\rIHDR' + bytes(30) + b'acTL' + bytes(8) + b'IDAT') is None
    assert sniff_still_image(b'RIFF\0\0\0\0WEBPVP8X\x0a\0\0\0\x02' + bytes(8)) is None  # animated WebP
    assert sniff_still_image(b'\0\0\0\x20ftypisom') is None and sniff_still_image(b'') is None
    assert still_image_demuxer('image2', 'mjpeg') == 'mjpeg' and still_image_demuxer('mov,mp4,m4a,3gp') is None


def test_one_frame_and_short_videos_name_the_file_the_count_and_the_need(files):
    with pytest.raises(DataError, match=rf"{files['one']}: 1 frame, but the sampling needs at least 2 \(min_frames "
                                        r"2; clip_len 1 x frame_interval 1, num_clips 4; .*looped.*picture saved"):
        SampleFrames(clip_len=1, num_clips=4)({'filename': files['one'], 'total_frames': 1})
    # a config that wants whole clips says so; below it, short videos loop as before
    with pytest.raises(DataError, match=r'five.mp4: 5 frames, but the sampling needs at least 8 \(min_frames 8; '
                                        r'clip_len 4 x frame_interval 2, num_clips 1\)$'):
        SampleFrames(clip_len=4, frame_interval=2, min_frames=8)({'filename': files['five'], 'total_frames': 5})
    looped = SampleFrames(clip_len=4, frame_interval=2, test_mode=True)({'total_frames': 5})['frame_inds']
    np.testing.assert_array_equal(looped, [0, 2, 4, 1])
    with pytest.raises(DataError, match='min_frames must be a positive int'):
        SampleFrames(clip_len=1, min_frames=0)


def test_error_policy_stops_at_the_first_non_video_naming_it(tmp_path, files):
    ds = _dataset(tmp_path, files, ['good', 'png', 'one'], on_bad_video='error')
    assert len(ds[0]['imgs']) == 4
    with pytest.raises(DataError) as info:
        ds[1]
    msg = str(info.value)
    assert f"{files['png']} {STILL}" in msg and 'VideoDataset sample 1' in msg and '`on_bad_video: skip`' in msg
    with pytest.raises(DataError, match=rf"{files['one']}: 1 frame, but the sampling needs at least 2"):
        ds[2]


def test_skip_policy_counts_and_lists_them(tmp_path, files):
    ds = _dataset(tmp_path, files, ['good', 'png', 'jpeg', 'one', 'five'], on_bad_video='skip')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        samples = [ds[i] for i in range(len(ds))]
    assert all(s['filename'] in (files['good'], files['five']) for s in samples)  # five frames loop: kept
    assert sorted(ds.skipped) == sorted([files['png'], files['jpeg'], files['one']])
    assert STILL in ds.skipped[files['png']] and '1 frame, but' in ds.skipped[files['one']]
    bad = [str(w.message) for w in caught if issubclass(w.category, BadSampleWarning)]
    assert len(bad) == 3 and '[on_bad_video: skip;' in bad[0] and '3 sample(s) skipped so far' in bad[2]


def test_wrong_policy_value_names_the_key_the_user_wrote(tmp_path, files):
    with pytest.raises(DataError, match=r"VideoDataset: on_bad_video must be one of \['error', 'skip'\].*got 'ignore'"):
        _dataset(tmp_path, files, ['good'], on_bad_video='ignore')
    with pytest.raises(DataError, match=r"VideoDataset: on_bad_sample must be one of .*got 'ignore'"):
        _dataset(tmp_path, files, ['good'], on_bad_sample='ignore')


def test_check_videos_reports_still_images_and_one_frame_videos(tmp_path, files):
    assert STILL in check_video(files['png'])
    assert '1 frame: a picture, not a video' in check_video(files['one'])
    assert check_video(files['five']) is None
    (tmp_path / 'all.txt').write_text(''.join(f'{files[n]} 0\n' for n in ('good', 'png', 'jpeg', 'one', 'five')))
    report = check_video_list(str(tmp_path / 'all.txt'))
    assert [n for n, _ in report.failures] == [files['png'], files['jpeg'], files['one']]


def test_feature_files_and_videos_are_not_mixed_up(tmp_path, files):
    np.savez(tmp_path / 'clip.npz', rgb=np.zeros((4, 8), np.float32))
    with pytest.raises(DataError, match=r'clip.npz is a frame-feature file \(.npz\), not a video: video models take'):
        PyAVReader(str(tmp_path / 'clip.npz'))
    with open(tmp_path / 'feat.pkl', 'wb') as f:
        pickle.dump({'rgb': np.zeros((4, 8), np.float32)}, f)
    lines = [f"{files['png']} 0", f"{files['good']} 1", 'feat.pkl 0']
    (tmp_path / 'feats.txt').write_text('\n'.join(lines) + '\n')
    ds = FeatureDataset(ann_file=str(tmp_path / 'feats.txt'), data_root=str(tmp_path), classes=CLASSES,
                        pipeline=[dict(type='LoadFeatures', modalities=['rgb'], max_frames=4)])
    assert ds[2]['features']['rgb'].shape == (4, 8)
    with pytest.raises(DataError, match=r'png.mp4 is a still image \(png\), not a frame-feature file: '
                                        r'frame-feature models take .npz / .pkl / .pickle files'):
        ds[0]
    with pytest.raises(DataError, match=r'index.mp4 is a video, not a frame-feature file: .*clip models'):
        ds[1]
