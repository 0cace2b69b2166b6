"""Find unreadable videos (or frame folders) of an annotation list before training (``tools/check_videos.py``).

Why a full decode: a truncated or damaged file often opens, and even yields its first frames, and fails only at
the frames a sampler happens to ask for, epochs later. Here every listed file is opened with the chosen backend
and decoded from the first frame to the last (one frame in memory at a time); a file whose decodable frames fall
short of what it claims, or that raises, is reported with the reason. Frame folders: every frame file the list
says the folder holds is read. A still image named like a video is refused by the decoders; a video (or folder)
of fewer than ``MIN_VIDEO_FRAMES`` frames, which ``SampleFrames`` refuses with its default ``min_frames``, is
reported too.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from oars.errors import DataError
from oars_deploy.clips.sampling import MIN_VIDEO_FRAMES
from video.datasets.base import iter_annotation_lines
from video.datasets.decoders import PyAVReader, RawFrameReader, VideoReader, open_video

CHECK_BACKENDS: tuple[str, ...] = ('pyav', 'torchcodec', 'rawframes')
_CHUNK = 32  # frames per torchcodec call when decoding a whole file


@dataclass
class VideoCheckReport:
    """``failures``: (file, reason) pairs, in list order; ``num_files``: how many files were checked."""

    list_file: str
    backend: str
    num_files: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)


def _too_short(path: str, total: int) -> None:
    """``DataError`` when ``total`` is below what ``SampleFrames`` accepts by default (``min_frames``)."""
    if total < MIN_VIDEO_FRAMES:
        raise DataError(f'{path}: {total} frame{"" if total == 1 else "s"}: a picture, not a video (SampleFrames '
                        f'refuses fewer than min_frames, by default {MIN_VIDEO_FRAMES})')


def check_video(path: str, backend: str = 'pyav') -> str | None:
    """None when every frame of the video ``path`` decodes and there are at least ``MIN_VIDEO_FRAMES``, else the
    reason (the ``DataError`` message)."""
    try:
        with open_video(path, backend) as reader:
            _decode_all(reader)
            _too_short(path, reader.total_frames)
    except DataError as err:
        return str(err)
    return None


def _decode_all(reader: VideoReader) -> None:
    if isinstance(reader, PyAVReader):
        decoded = reader.count_decodable_frames()
        if decoded < reader.total_frames:
            raise DataError(f'{reader.path}: only {decoded} of its {reader.total_frames} frames decode '
                            '(damaged stream)')
        return
    for start in range(0, reader.total_frames, _CHUNK):
        reader.get_frames(np.arange(start, min(start + _CHUNK, reader.total_frames)))


def check_frame_folder(frame_dir: str, total_frames: int, filename_tmpl: str, start_index: int) -> str | None:
    """None when every frame file of the folder reads and there are at least ``MIN_VIDEO_FRAMES``, else the
    reason."""
    try:
        reader = RawFrameReader(frame_dir, total_frames, filename_tmpl, start_index)
        for i in range(total_frames):
            reader.get_frames([i])
        _too_short(frame_dir, total_frames)
    except DataError as err:
        return str(err)
    return None


def _check_one(job: tuple) -> str | None:
    kind, args = job
    return check_video(*args) if kind == 'video' else check_frame_folder(*args)


def check_video_list(list_file: str, root: str = '', backend: str = 'pyav', workers: int = 0,
                     filename_tmpl: str = 'img_{:05d}.jpg', start_index: int = 1) -> VideoCheckReport:
    """Decode every file of an annotation list and report the unreadable ones.

    Args:
        list_file: ``path label ...`` lines (videos) or ``frame_dir total_frames label ...`` (``rawframes``).
        root: the folder the list's relative paths are under (default: the list's folder).
        backend: ``pyav`` | ``torchcodec`` (videos) or ``rawframes`` (frame folders).
        workers: processes to check in parallel (0: in this process).
        filename_tmpl, start_index: frame file names of ``rawframes`` folders (as ``RawframeDataset``).

    Returns:
        a ``VideoCheckReport``. A line the list cannot give a file for (no total_frames for rawframes) is a
        failure of that line.
    """
    if backend not in CHECK_BACKENDS:
        raise DataError(f'check_videos: backend must be one of {list(CHECK_BACKENDS)}, got {backend!r}')
    root = root or os.path.dirname(os.path.abspath(list_file))
    report = VideoCheckReport(list_file, backend)
    names, jobs = [], []
    for lineno, fields in iter_annotation_lines(list_file):
        path = os.path.abspath(os.path.join(root, fields[0]))
        if backend == 'rawframes':
            try:
                total = int(fields[1])
            except (IndexError, ValueError):
                report.failures.append((f'{list_file} line {lineno}', 'expected `frame_dir total_frames label`, '
                                        f'got {fields}'))
                continue
            jobs.append(('frames', (path, total, filename_tmpl, start_index)))
        else:
            jobs.append(('video', (path, backend)))
        names.append(path)
    if workers > 0 and len(jobs) > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            reasons = list(pool.map(_check_one, jobs, chunksize=max(1, len(jobs) // (8 * workers))))
    else:
        reasons = [_check_one(job) for job in jobs]
    report.num_files = len(jobs)
    report.failures += [(name, why) for name, why in zip(names, reasons) if why is not None]
    return report


def format_video_report(report: VideoCheckReport) -> str:
    """Human-readable summary: one line per bad file, then the count."""
    lines = [f'{report.list_file}: {report.num_files} file(s) checked with {report.backend}']
    lines += [f'  BAD {name}: {why}' for name, why in report.failures]
    lines.append(f'  {len(report.failures)} unreadable' if report.failures else '  all readable')
    return '\n'.join(lines)
