"""SampleFrames against hand-computed indices (TSN segments, dense clips, multi-clip test, short videos)."""

from __future__ import annotations

import numpy as np
import pytest

from oars.errors import DataError
from video.registry import TRANSFORMS
from video.transforms import SampleFrames


def _inds(total: int, **kwargs) -> np.ndarray:
    out = SampleFrames(**kwargs)({'total_frames': total, 'start_index': 0})
    assert out['frame_inds'].dtype == np.int64
    return out['frame_inds']


def test_segment_test_mode_takes_segment_centres():
    # 80 frames, 8 segments of 10: centres 5, 15, ..., 75
    np.testing.assert_array_equal(_inds(80, clip_len=1, num_clips=8, test_mode=True), np.arange(8) * 10 + 5)
    # 30 frames, segments of 3.75: int(3.75 * k + 1.875)
    np.testing.assert_array_equal(_inds(30, clip_len=1, num_clips=8, test_mode=True),
                                  [1, 5, 9, 13, 16, 20, 24, 28])


def test_segment_train_draws_one_frame_per_segment_over_the_whole_segment():
    np.random.seed(0)
    draws = np.stack([_inds(80, clip_len=1, num_clips=8) for _ in range(300)])  # [300, 8]
    np.testing.assert_array_equal(draws.min(axis=0), np.arange(8) * 10)
    np.testing.assert_array_equal(draws.max(axis=0), np.arange(8) * 10 + 9)
    # 83 frames: segments of 83 // 8 = 10, the 3 tail frames are never drawn
    draws = np.stack([_inds(83, clip_len=1, num_clips=8) for _ in range(300)])
    assert draws.max() == 79


def test_dense_clip_with_interval():
    # 100 frames, 4 frames 2 apart (span 8): 93 start positions, centre int(46.5) = 46
    np.testing.assert_array_equal(_inds(100, clip_len=4, frame_interval=2, test_mode=True), [46, 48, 50, 52])
    np.random.seed(1)
    for _ in range(50):
        inds = _inds(100, clip_len=4, frame_interval=2)
        assert 0 <= inds[0] <= 92
        np.testing.assert_array_equal(np.diff(inds), [2, 2, 2])


def test_num_clips_for_multi_view_test():
    # 93 start positions in 3 segments of 31: starts int(15.5), int(46.5), int(77.5)
    inds = _inds(100, clip_len=4, frame_interval=2, num_clips=3, test_mode=True)
    np.testing.assert_array_equal(inds, [15, 17, 19, 21, 46, 48, 50, 52, 77, 79, 81, 83])
    out = SampleFrames(clip_len=4, frame_interval=2, num_clips=3, test_mode=True)({'total_frames': 100})
    assert (out['clip_len'], out['frame_interval'], out['num_clips']) == (4, 2, 3)


@pytest.mark.parametrize('test_mode', [True, False])
def test_short_video_loops_or_repeats_the_last_frame(test_mode):
    # 5 frames, a clip of 4 frames 2 apart starts at 0: 0 2 4 (6 is past the end)
    np.testing.assert_array_equal(_inds(5, clip_len=4, frame_interval=2, test_mode=test_mode), [0, 2, 4, 1])
    np.testing.assert_array_equal(
        _inds(5, clip_len=4, frame_interval=2, test_mode=test_mode, out_of_bound_opt='repeat_last'), [0, 2, 4, 4])
    # two clips of 3 consecutive frames from 2 frames: both start at 0
    np.testing.assert_array_equal(
        _inds(2, clip_len=3, num_clips=2, test_mode=test_mode, out_of_bound_opt='repeat_last'), [0, 1, 1, 0, 1, 1])


def test_fewer_frames_than_segments():
    # 5 frames, 8 segments: starts spread evenly, around(k * 5 / 8), in train and test
    np.testing.assert_array_equal(_inds(5, clip_len=1, num_clips=8), [0, 1, 1, 2, 2, 3, 4, 4])
    # test: centres int(0.625 * k + 0.3125)
    np.testing.assert_array_equal(_inds(5, clip_len=1, num_clips=8, test_mode=True), [0, 0, 1, 2, 2, 3, 4, 4])
    # 20 frames, 16 clips of 8: 13 starts, sorted random ones
    np.random.seed(2)
    inds = _inds(20, clip_len=8, num_clips=16).reshape(16, 8)
    assert (np.diff(inds[:, 0]) >= 0).all() and inds[:, 0].max() <= 12
    assert (inds < 20).all()


def test_twice_sample_adds_segment_starts():
    out = SampleFrames(clip_len=1, num_clips=4, test_mode=True, twice_sample=True)({'total_frames': 80})
    np.testing.assert_array_equal(out['frame_inds'], [10, 30, 50, 70, 0, 20, 40, 60])
    assert out['num_clips'] == 8


def test_test_mode_is_deterministic_and_leaves_the_global_rng_alone():
    t = SampleFrames(clip_len=8, frame_interval=4, num_clips=3, test_mode=True)
    np.random.seed(0)
    a = t({'total_frames': 301})['frame_inds']
    state = np.random.get_state()[1].copy()
    np.random.seed(12345)
    np.random.rand(7)
    b = t({'total_frames': 301})['frame_inds']
    np.testing.assert_array_equal(a, b)
    np.random.seed(0)
    t({'total_frames': 301})
    np.testing.assert_array_equal(np.random.get_state()[1], state)  # no draw consumed


def test_training_follows_the_global_seed():
    t = SampleFrames(clip_len=1, num_clips=8)
    np.random.seed(3)
    a = t({'total_frames': 200})['frame_inds']
    np.random.seed(3)
    b = t({'total_frames': 200})['frame_inds']
    np.testing.assert_array_equal(a, b)
    np.random.seed(4)
    assert not all(np.array_equal(a, t({'total_frames': 200})['frame_inds']) for _ in range(5))


def test_frame_inds_are_zero_based_whatever_start_index():
    out = SampleFrames(clip_len=1, num_clips=2, test_mode=True)({'total_frames': 4, 'start_index': 1})
    np.testing.assert_array_equal(out['frame_inds'], [1, 3])
    assert out['start_index'] == 1


@pytest.mark.parametrize('kwargs, name', [
    (dict(clip_len=0), 'clip_len'),
    (dict(clip_len=1, frame_interval=-1), 'frame_interval'),
    (dict(clip_len=1, num_clips=2.5), 'num_clips'),
    (dict(clip_len=1, out_of_bound_opt='wrap'), 'out_of_bound_opt'),
    (dict(clip_len=1, twice_sample=True), 'twice_sample'),
])
def test_bad_arguments_name_the_argument(kwargs, name):
    with pytest.raises(DataError, match=name):
        SampleFrames(**kwargs)


def test_bad_total_frames_names_the_file():
    with pytest.raises(DataError, match='v.mp4.*total_frames'):
        SampleFrames(clip_len=1)({'filename': 'v.mp4', 'total_frames': 0})


def test_registered_with_repr():
    t = TRANSFORMS.build(dict(type='SampleFrames', clip_len=32, frame_interval=2, test_mode=True))
    assert repr(t) == ("SampleFrames(clip_len=32, frame_interval=2, num_clips=1, test_mode=True, "
                       "out_of_bound_opt='loop', twice_sample=False, min_frames=2)")
