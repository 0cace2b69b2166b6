"""Sequential decoding of a whole video file, one frame at a time (the feature extractor reads every frame once).

Why not :class:`video.datasets.decoders.PyAVReader`'s ``get_frames``: it seeks to a keyframe for each call, which
for thousands of overlapping snippets would decode long GOPs again and again. Here the file is opened with that
reader first (the same refusals of missing, still-image, truncated or frame-less files, and the same
``total_frames`` / ``avg_fps``), then decoded front to back: the k-th frame the decoder outputs (presentation
order) is frame k, as the reader numbers frames by sorted presentation timestamps, and frames are converted to BGR
with one ``VideoReformatter`` exactly as the reader does, so a snippet sees the pixels the test pipeline sees.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from oars.errors import DataError
from video.datasets.decoders import PyAVReader


@dataclass(frozen=True)
class VideoInfo:
    """What the extractor records of one video.

    Attributes:
        total_frames: frames in the stream (the decoders' count).
        fps: average frame rate (0.0 when the file states none).
        duration_second: ``total_frames / fps``, or the container's duration when there is no rate.
    """

    total_frames: int
    fps: float
    duration_second: float


def probe(path: str) -> VideoInfo:
    """Open ``path`` with the training decoder (demuxing only) and return its :class:`VideoInfo`.

    Raises:
        DataError: missing file, a still image or feature file, no video stream, no frames, truncated file,
            or a video without a usable duration.
    """
    with PyAVReader(path) as reader:
        total, fps = int(reader.total_frames), float(reader.avg_fps)
        seconds = total / fps if fps > 0 else _container_seconds(reader)
    if not seconds > 0:
        raise DataError(f"{path}: the video states no frame rate and no duration; duration_second is unknown")
    return VideoInfo(total_frames=total, fps=fps, duration_second=float(seconds))


def _container_seconds(reader: PyAVReader) -> float:
    container = getattr(reader, "_container", None)
    duration = getattr(container, "duration", None)
    return float(duration) / 1e6 if duration else 0.0  # FFmpeg's AV_TIME_BASE is microseconds


def iter_frames(path: str, total_frames: int) -> Iterator[np.ndarray]:
    """Every frame of ``path`` in order, decoded one at a time (only the current one is held here).

    Args:
        path: the video file (already checked by :func:`probe`).
        total_frames: the frame count :func:`probe` found; decoding stops after it.

    Yields:
        HxWx3 uint8 BGR arrays, frame 0 first.

    Raises:
        DataError: an FFmpeg error while decoding, or the stream ending before ``total_frames`` frames (both
            name the file and where it stopped).
    """
    import av

    count = 0
    try:
        with av.open(path, metadata_errors="ignore") as container:
            stream = container.streams.video[0]
            stream.thread_count = 1  # DataLoader workers already run in parallel
            reformatter = av.video.reformatter.VideoReformatter()
            for frame in container.decode(stream):
                if count == total_frames:
                    break
                yield reformatter.reformat(frame, format="bgr24").to_ndarray()
                count += 1
    except av.FFmpegError as err:
        raise DataError(f"cannot decode video {path} (after {count} frames): {type(err).__name__}: {err}") from None
    if count < total_frames:
        raise DataError(f"{path}: the stream ended after {count} of {total_frames} frames (truncated or damaged "
                        "file)")
