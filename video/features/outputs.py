"""The extractor's files and its resume rule.

``OUT/<video_id>.npy``: float32 [T, C], one row per snippet. ``OUT/<video_id>.scores.npy``: float32 [K], the video's
class probabilities (the recognizer's per-snippet prediction averaged over the snippets; class ids are the
recognizer's), which ``LoadVideoClassScores`` reads for ActivityNet-style detection. ``OUT/videos.json``:
``{video_id: {"duration_second", "duration_frame", "num_frames", "fps", "feature_frame", "snippet", "stride"}}`` --
the fields ``ActivityNetFeatureDataset`` reads (``duration_frame`` is ``num_frames`` under the name it reads, so
that its ``feature_second = feature_frame / duration_frame * duration_second`` is the time the features cover).
``feature_frame`` is ``T * S``, the frames the T snippets step over, capped at ``num_frames`` (it passes the end
only for a video shorter than one snippet or a stride longer than the snippet). Both are written atomically
(:func:`oars_deploy.atomic.atomic_write`), the index after every video, so a killed run loses at most the video in
progress. A video is done when its ``.npy`` and ``.scores.npy`` exist, the index has its entry with the same
``snippet`` and ``stride``, and the file holds the ``T`` rows its ``num_frames`` gives.
"""

from __future__ import annotations

import io
import json
import os
import os.path as osp
from collections.abc import Sequence

import numpy as np

from oars.errors import OarsError
from oars_deploy.atomic import atomic_write
from video.features.frames import VideoInfo
from video.features.snippets import num_snippets

VIDEOS_FILE = "videos.json"
SCORES_SUFFIX = ".scores.npy"


def video_ids(paths: Sequence[str]) -> list[tuple[str, str]]:
    """(video_id, path) for each video: the file name without its suffix.

    Raises:
        OarsError: two videos share a stem (``a.mp4`` and ``a.avi``): their feature files would collide.
    """
    seen: dict[str, str] = {}
    for path in paths:
        vid = osp.splitext(osp.basename(path))[0]
        if vid in seen:
            raise OarsError(f"{seen[vid]} and {path} would both be written as {vid}.npy; rename one")
        seen[vid] = path
    return [(vid, path) for vid, path in seen.items()]


def read_index(out_dir: str) -> dict[str, dict]:
    """``OUT/videos.json`` as a dict ({} when absent).

    Raises:
        OarsError: the file exists but is not a JSON object (the message says to remove it).
    """
    path = osp.join(out_dir, VIDEOS_FILE)
    if not osp.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise OarsError(f"{path} is not readable JSON ({err}); remove it (and the .npy files) to start over") from None
    if not isinstance(data, dict):
        raise OarsError(f"{path} is not a JSON object of videos; remove it to start over")
    return data


def entry(info: VideoInfo, count: int, snippet: int, stride: int) -> dict:
    """One video's ``videos.json`` record (see the module docstring)."""
    return {"duration_second": info.duration_second, "duration_frame": info.total_frames,
            "num_frames": info.total_frames, "fps": info.fps,
            "feature_frame": min(int(count) * int(stride), info.total_frames),
            "snippet": int(snippet), "stride": int(stride)}


def is_done(out_dir: str, video_id: str, index: dict[str, dict], snippet: int, stride: int) -> bool:
    """Whether a previous run finished ``video_id`` with these snippet settings (see the module docstring)."""
    record = index.get(video_id)
    path = osp.join(out_dir, f"{video_id}.npy")
    if not isinstance(record, dict) or record.get("snippet") != snippet or record.get("stride") != stride \
            or not osp.isfile(path) or not osp.isfile(osp.join(out_dir, video_id + SCORES_SUFFIX)):
        return False
    try:
        rows = np.load(path, mmap_mode="r").shape[0]
    except (OSError, ValueError, IndexError):
        return False
    total = record.get("num_frames")
    return isinstance(total, int) and rows == num_snippets(total, snippet, stride)


def write_features(out_dir: str, video_id: str, feats: np.ndarray) -> str:
    """Write float32 [T, C] ``feats`` to ``OUT/<video_id>.npy`` atomically; returns the path."""
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(feats, dtype=np.float32))
    return atomic_write(osp.join(out_dir, f"{video_id}.npy"), buf.getvalue())


def write_scores(out_dir: str, video_id: str, scores: np.ndarray) -> str:
    """Write float32 [K] ``scores`` to ``OUT/<video_id>.scores.npy`` atomically; returns the path."""
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(scores, dtype=np.float32).reshape(-1))
    return atomic_write(osp.join(out_dir, video_id + SCORES_SUFFIX), buf.getvalue())


def write_index(out_dir: str, index: dict[str, dict]) -> str:
    """Write ``OUT/videos.json`` atomically (sorted by video id); returns the path."""
    os.makedirs(out_dir, exist_ok=True)
    return atomic_write(osp.join(out_dir, VIDEOS_FILE), json.dumps(dict(sorted(index.items())), indent=1) + "\n")
