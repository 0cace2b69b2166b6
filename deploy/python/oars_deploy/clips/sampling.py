"""Test-time frame sampling of a video: which 0-based frames a clip classifier sees (torch-free).

One implementation for training and deployment: ``video.transforms.SampleFrames`` (``test_mode=True``) calls
:func:`centred_clip_starts` and :func:`clip_indices`, and so does the deployed video predictor with deploy.yaml's
``sampling`` section; deploy/cpp implements the same two formulas again (``video.cpp``), checked against these
by the tests.

The rule (TSN / MMAction2's test mode): the ``total - clip_len * frame_interval + 1`` start positions that keep a
whole clip inside the video are cut into ``num_clips`` equal segments and each clip starts at its segment's
centre (``twice_sample`` adds clips at the segments' beginnings); a video too short for one clip starts every
clip at frame 0. Indices past the end are wrapped (``loop``) or replaced by the clip's last frame inside the
video (``repeat_last``).

How short a video may be: however it is sampled, a video with fewer than ``min_frames`` frames (default
:data:`MIN_VIDEO_FRAMES` = 2: one frame shows no motion, and a picture saved as a video has one) is refused by
:func:`check_frame_count` with a message naming the file, its frame count and what the sampling needs; above it,
clips longer than the video are looped or repeat their last frame as ``out_of_bound_opt`` declares. A config
that wants whole clips only sets ``min_frames: clip_len * frame_interval``.
"""

from __future__ import annotations

import numpy as np

OUT_OF_BOUND_OPTS = ("loop", "repeat_last")
MIN_VIDEO_FRAMES = 2  # SampleFrames' default min_frames: a one-frame file is a picture, not a video


def centred_clip_starts(total: int, clip_len: int, frame_interval: int, num_clips: int,
                        twice_sample: bool = False, position: float = 0.5) -> np.ndarray:
    """Centred clip starts, deterministic.

    Args:
        total: frames in the video (>= 1).
        clip_len, frame_interval, num_clips: SampleFrames' parameters (positive ints).
        twice_sample: also start a clip at each segment's beginning (TSM's test views).
        position: where in its segment each clip starts, as a fraction (0.5: the centre, the test sampling;
            INT8 calibration also draws clips at other positions of the same segments).

    Returns:
        np.int64 [num_clips] (or [2 * num_clips] with ``twice_sample``: the positioned starts first).
    """
    starts = total - clip_len * frame_interval + 1
    if starts <= 0:
        offsets = np.zeros(num_clips, dtype=np.int64)
        return np.concatenate([offsets, offsets]) if twice_sample else offsets
    seg = starts / num_clips
    base = np.arange(num_clips) * seg
    offsets = (base + seg * position).astype(np.int64)
    if twice_sample:
        offsets = np.concatenate([offsets, base.astype(np.int64)])
    return offsets


def clip_indices(offsets: np.ndarray, clip_len: int, frame_interval: int, total: int,
                 out_of_bound_opt: str = "loop") -> np.ndarray:
    """Frame indices of clips starting at ``offsets``.

    Args:
        offsets: int [K] clip starts in [0, total - 1].
        clip_len, frame_interval: frames per clip and their spacing.
        total: frames in the video.
        out_of_bound_opt: ``'loop'`` (index modulo ``total``) or ``'repeat_last'`` (the clip's last index inside
            the video; a clip's first index always is, and indices increase along a clip).

    Returns:
        np.int64 [K * clip_len], clip-major, every index in [0, total - 1].
    """
    if out_of_bound_opt not in OUT_OF_BOUND_OPTS:
        raise ValueError(f"out_of_bound_opt must be one of {OUT_OF_BOUND_OPTS}, got {out_of_bound_opt!r}")
    inds = np.asarray(offsets, dtype=np.int64)[:, None] + np.arange(clip_len, dtype=np.int64) * frame_interval
    if out_of_bound_opt == "loop":
        inds = inds % total
    else:
        inside = inds < total
        last = np.where(inside, inds, -1).max(axis=1, keepdims=True)
        inds = np.where(inside, inds, last)
    return inds.reshape(-1)


def sampled_frame_indices(total: int, sampling: dict) -> np.ndarray:
    """deploy.yaml's ``sampling`` section (clip_len, frame_interval, num_clips, out_of_bound_opt, twice_sample)
    applied to a video of ``total`` frames: np.int64 [views * clip_len], as ``SampleFrames(test_mode=True)``."""
    clip_len, interval = int(sampling["clip_len"]), int(sampling.get("frame_interval", 1))
    starts = centred_clip_starts(total, clip_len, interval, int(sampling.get("num_clips", 1)),
                              bool(sampling.get("twice_sample", False)))
    return clip_indices(starts, clip_len, interval, total, sampling.get("out_of_bound_opt", "loop"))


def check_frame_count(path: str, total: int, sampling: dict, error: type[Exception] = ValueError) -> None:
    """Refuse a video with fewer frames than the sampling needs (``sampling['min_frames']``, default
    :data:`MIN_VIDEO_FRAMES`), naming the file, its frame count and what the sampling needs and why.

    Args:
        path: the video (or frame folder), for the message.
        total: its frame count.
        sampling: SampleFrames' parameters as deploy.yaml's ``sampling`` section writes them (``clip_len``,
            ``frame_interval``, ``out_of_bound_opt``, ``min_frames``).
        error: the exception class (DeployError in the predictor, DataError in training so that
            ``on_bad_sample`` handles it).

    Raises:
        error: ``total < min_frames``.
    """
    need = int(sampling.get("min_frames", MIN_VIDEO_FRAMES))
    if total >= need:
        return
    clip_len, interval = int(sampling["clip_len"]), int(sampling.get("frame_interval", 1))
    clips = int(sampling.get("num_clips", 1))
    why = f"min_frames {need}; clip_len {clip_len} x frame_interval {interval}, num_clips {clips}"
    if need < max(clip_len * interval, clips * clip_len):  # the sampler would loop or repeat frames above need
        opt = sampling.get("out_of_bound_opt", "loop")
        how = "looped" if opt == "loop" else "filled with their last frame"
        why += f"; videos shorter than that are {how} (out_of_bound_opt '{opt}') down to min_frames"
    tail = "; one frame shows no motion: is it a picture saved as a video?" if total == 1 else ""
    raise error(f"{path}: {total} frame{'' if total == 1 else 's'}, but the sampling needs at least {need} "
                f"({why}){tail}")
