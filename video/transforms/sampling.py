"""Which frames of a video a sample decodes: TSN segment sampling and dense clips."""

from __future__ import annotations

import numpy as np

from oars.errors import DataError
from oars_deploy.clips.sampling import (
    MIN_VIDEO_FRAMES,
    OUT_OF_BOUND_OPTS,
    centred_clip_starts,
    check_frame_count,
    clip_indices,
)
from video.registry import TRANSFORMS


def _positive_int(value: object, name: str) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
        raise DataError(f'SampleFrames.{name} must be a positive int, got {value!r}')
    return int(value)


@TRANSFORMS.register_module()
class SampleFrames:
    """Choose ``num_clips`` clips of ``clip_len`` frames, ``frame_interval`` apart, from ``total_frames``.

    The video is cut into ``num_clips`` equal segments of the start positions that leave room for a whole clip
    (``total_frames - clip_len * frame_interval + 1`` of them); each clip starts in its own segment:

    - training: at a uniformly random offset inside the segment (TSN's sparse sampling: "1x1x8" is
      ``clip_len=1, num_clips=8``: one random frame in each eighth of the video);
    - ``test_mode``: at the segment's centre, without any random draw, so test views are the same in every run
      whatever the RNG state.

    Dense sampling for 3D models is the same rule with ``clip_len > 1`` (e.g. 32 frames ``frame_interval=2``
    apart, ``num_clips=1``; ``num_clips=10`` for multi-view test). Videos with fewer start positions than clips
    get evenly spread starts (or all clips at frame 0 when not even one clip fits), and indices past the end are
    wrapped (``out_of_bound_opt='loop'``) or replaced by the clip's last real frame (``'repeat_last'``).
    ``twice_sample`` (test mode only, TSM) adds a second set of clips starting at the segments' beginnings.

    A video with fewer than ``min_frames`` frames (default 2) is a ``DataError`` naming the file, its frame count
    and what the sampling needs (so ``on_bad_sample`` handles it): one frame shows no motion, and a picture saved
    as ``.mp4`` opens as one frame. Set ``min_frames: clip_len * frame_interval`` to refuse videos shorter than a
    clip instead of looping them (the deployed predictor reads it from deploy.yaml too).

    Reads ``total_frames``. Writes ``frame_inds`` (np.int64 [num_clips * clip_len], 0-based, clip-major, in
    [0, total_frames - 1]; a raw-frame decoder adds ``start_index`` to make file numbers), ``clip_len``,
    ``frame_interval`` and ``num_clips`` (doubled by ``twice_sample``). Training draws use NumPy's global RNG,
    which oars seeds per worker (``oars.data.worker_seed``), so ``randomness.seed`` reproduces them.
    """

    def __init__(self, clip_len: int, frame_interval: int = 1, num_clips: int = 1, test_mode: bool = False,
                 out_of_bound_opt: str = 'loop', twice_sample: bool = False,
                 min_frames: int = MIN_VIDEO_FRAMES) -> None:
        self.clip_len = _positive_int(clip_len, 'clip_len')
        self.frame_interval = _positive_int(frame_interval, 'frame_interval')
        self.num_clips = _positive_int(num_clips, 'num_clips')
        self.min_frames = _positive_int(min_frames, 'min_frames')
        if out_of_bound_opt not in OUT_OF_BOUND_OPTS:
            raise DataError(f'SampleFrames.out_of_bound_opt must be one of {OUT_OF_BOUND_OPTS}, '
                            f'got {out_of_bound_opt!r}')
        if twice_sample and not test_mode:
            raise DataError('SampleFrames.twice_sample=True needs test_mode=True (it adds test views)')
        self.test_mode = bool(test_mode)
        self.out_of_bound_opt = out_of_bound_opt
        self.twice_sample = bool(twice_sample)
        self._sampling = self.sampling()  # built once: every sample's frame-count check reads it

    def _train_offsets(self, total: int) -> np.ndarray:
        """Random clip starts int64 [num_clips]: one per segment of the ``total - span + 1`` start positions."""
        span = self.clip_len * self.frame_interval
        starts = total - span + 1  # start positions that keep the whole clip inside the video
        seg = starts // self.num_clips
        if seg > 0:
            return np.arange(self.num_clips) * seg + np.random.randint(seg, size=self.num_clips)
        if total > max(self.num_clips, span):
            # Fewer start positions than clips: sorted random starts, some repeated.
            return np.sort(np.random.randint(starts, size=self.num_clips))
        if starts > 0:
            # Exactly as many frames as clips (or fewer starts than clips): spread evenly, deterministic.
            return np.around(np.arange(self.num_clips) * (starts / self.num_clips)).astype(np.int64)
        return np.zeros(self.num_clips, dtype=np.int64)  # not even one clip fits: all start at frame 0

    def _test_offsets(self, total: int) -> np.ndarray:
        """Centred clip starts int64 [num_clips] (or [2 * num_clips] with ``twice_sample``); no random draw. The
        formula lives in the torch-free ``oars_deploy.clips.sampling``, which the deployed predictor runs too."""
        return centred_clip_starts(total, self.clip_len, self.frame_interval, self.num_clips, self.twice_sample)

    def frame_indices(self, total_frames: int) -> np.ndarray:
        """0-based frame indices np.int64 [num_clips * clip_len] (x2 with ``twice_sample``), clip-major, every one
        in [0, total_frames - 1]."""
        offsets = self._test_offsets(total_frames) if self.test_mode else self._train_offsets(total_frames)
        return clip_indices(offsets, self.clip_len, self.frame_interval, total_frames, self.out_of_bound_opt)

    def sampling(self) -> dict:
        """The parameters as deploy.yaml's ``sampling`` section writes them (the runtime's checks take that)."""
        return {'clip_len': self.clip_len, 'frame_interval': self.frame_interval, 'num_clips': self.num_clips,
                'out_of_bound_opt': self.out_of_bound_opt, 'twice_sample': self.twice_sample,
                'min_frames': self.min_frames}

    def __call__(self, results: dict) -> dict:
        total = results.get('total_frames')
        where = str(results.get('filename') or results.get('frame_dir') or 'a sample')
        if not isinstance(total, (int, np.integer)) or isinstance(total, bool) or total < 1:
            raise DataError(f'{where}: SampleFrames needs total_frames >= 1 (set by VideoInit or the raw-frame '
                            f'annotation), got {total!r}')
        check_frame_count(where, int(total), self._sampling, DataError)
        results['frame_inds'] = self.frame_indices(int(total))
        results['clip_len'] = self.clip_len
        results['frame_interval'] = self.frame_interval
        results['num_clips'] = self.num_clips * (2 if self.twice_sample else 1)
        return results

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(clip_len={self.clip_len}, frame_interval={self.frame_interval}, '
                f'num_clips={self.num_clips}, test_mode={self.test_mode}, '
                f'out_of_bound_opt={self.out_of_bound_opt!r}, twice_sample={self.twice_sample}, '
                f'min_frames={self.min_frames})')
