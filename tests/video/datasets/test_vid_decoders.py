"""Decoders: exact frames by index on every backend, seeking instead of decoding from the start, and clear errors
naming the file for damaged, foreign and missing files."""

from __future__ import annotations

import sys

import av
import numpy as np
import pytest
from conftest import NUM_FRAMES, frame_index, index_frames, write_frame_folder

from oars.errors import DataError
from video.datasets.decoders import (
    BackendUnavailableError,
    PyAVReader,
    RawFrameReader,
    open_video,
    torchcodec_available,
)

WANTED = [0, 5, 5, 11, 3]
BACKENDS = ['pyav', pytest.param('torchcodec', marks=pytest.mark.skipif(not torchcodec_available(),
                                                                         reason='torchcodec not usable here'))]


def _sequential(path: str) -> list[np.ndarray]:
    """Every frame, decoded in order with plain PyAV (the reference)."""
    with av.open(path) as c:
        return [f.to_ndarray(format='bgr24') for f in c.decode(c.streams.video[0])]


@pytest.mark.parametrize('backend', BACKENDS)
def test_frames_by_index_are_exactly_those_frames(index_clip, backend):
    with open_video(index_clip, backend) as reader:
        assert reader.total_frames == NUM_FRAMES
        assert reader.avg_fps == pytest.approx(10.0)
        frames = reader.get_frames(np.array(WANTED, dtype=np.int64))
        tail = reader.get_frames([29, 28, 17, 0])  # backwards, across keyframes, after a first call
    assert [frame_index(f) for f in frames] == WANTED
    assert [frame_index(f) for f in tail] == [29, 28, 17, 0]
    assert all(f.shape == (48, 64, 3) and f.dtype == np.uint8 for f in frames)
    # BGR order: the bottom half is grey, the top half's texture matches the plain sequential decode
    ref = _sequential(index_clip)
    tol = 0 if backend == 'pyav' else 2  # torchcodec converts colours with its own filter
    for i, f in zip(WANTED, frames):
        assert np.abs(f.astype(int) - ref[i].astype(int)).max() <= tol


def test_pyav_seeks_to_the_keyframe_instead_of_decoding_from_the_start(index_clip):
    reader = PyAVReader(index_clip)
    keys = reader._key_pos
    assert keys.size > 2  # the clip was written with a keyframe every few frames
    target = int(keys[-1]) + 1 if keys[-1] + 1 < NUM_FRAMES else int(keys[-1])
    assert frame_index(reader.get_frames([target])[0]) == target
    assert reader.decoded_frames <= target - int(keys[-1]) + 1 + 3  # + the B-frames x264 may hold back
    assert reader.decoded_frames < target
    reader.close()
    reader.close()  # idempotent


def test_rawframe_reader_reads_file_n_for_index_n_minus_start_index(tmp_path):
    for start in (0, 1, 5):
        folder = write_frame_folder(tmp_path / f'start{start}', start, num=12)
        reader = RawFrameReader(str(folder), 12, 'img_{:05d}.png', start_index=start)
        assert reader.frame_path(0).endswith(f'img_{start:05d}.png')
        assert [frame_index(f) for f in reader.get_frames(WANTED)] == WANTED
        expected = np.asarray(index_frames(12)[11])
        assert np.array_equal(reader.get_frames([11])[0], expected)  # PNG: lossless, BGR as written
    # start_index 1 on a folder numbered from 0: the last index asks for a file that is not there
    reader = RawFrameReader(str(tmp_path / 'start0'), 12, 'img_{:05d}.png', start_index=1)
    with pytest.raises(DataError, match=r'img_00012\.png is not found.*start_index 1'):
        reader.get_frames([11])


@pytest.mark.parametrize('kind', ['truncated', 'truncated_faststart', 'notes', 'empty'])
def test_damaged_or_foreign_files_raise_data_error_naming_the_file(bad_files, kind):
    path = bad_files[kind]
    with pytest.raises(DataError) as info:
        with open_video(path) as reader:
            reader.get_frames(list(range(reader.total_frames)))
    msg = str(info.value)
    assert path in msg
    if kind == 'truncated_faststart':
        assert 'truncated' in msg and f'lists {NUM_FRAMES} frames' in msg


def test_missing_file_bad_index_and_unknown_backend(index_clip, tmp_path):
    with pytest.raises(DataError, match='video file not found: .*nothere.mp4'):
        open_video(str(tmp_path / 'nothere.mp4'))
    with open_video(index_clip) as reader:
        with pytest.raises(DataError, match=r'index.mp4: frame index 30 is outside \[0, 29\]'):
            reader.get_frames([3, 30])
        with pytest.raises(DataError, match='1-D integer'):
            reader.get_frames(np.array([1.5]))
    with pytest.raises(DataError, match=r"backend must be one of \['pyav', 'torchcodec'\], got 'decord'"):
        open_video(index_clip, 'decord')
    with pytest.raises(DataError, match='frame folder not found'):
        RawFrameReader(str(tmp_path / 'none'), 3)


def test_torchcodec_missing_is_a_setup_error_not_a_bad_video(index_clip, monkeypatch):
    monkeypatch.setitem(sys.modules, 'torchcodec', None)  # import fails as when it is not installed
    monkeypatch.setitem(sys.modules, 'torchcodec.decoders', None)
    assert not torchcodec_available()
    with pytest.raises(BackendUnavailableError, match="backend 'torchcodec' is not installed.*backend: pyav") as info:
        open_video(index_clip, 'torchcodec')
    assert not isinstance(info.value, DataError)  # on_bad_sample: skip must not skip every video for this
