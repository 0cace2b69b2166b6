"""Decode chosen frames of a video file with PyAV, numbered as the training decoder numbers them (torch-free).

Frame ``i`` is the frame with the ``i``-th smallest presentation timestamp among the stream's packets (B-frames
and variable frame rates included), exactly as ``video.datasets.decoders.PyAVReader``: opening demuxes the stream
once (packets only) to list the timestamps and the keyframes; ``frames(inds)`` then seeks to the keyframe at or
before each run of wanted frames and decodes forward, so only those runs are decoded and the whole video is
never in memory. Frames are HxWx3 uint8 BGR (``to_ndarray(format='bgr24')``, the training decoder's call), so the
deployed model sees the pixels evaluation saw. PyAV is optional for oars_deploy (``pip install av``) and is
imported when a video is opened.
"""

from __future__ import annotations

import os.path as osp
from collections.abc import Sequence

import numpy as np

from oars_deploy.errors import DeployError


def _import_av():
    try:
        import av
    except ImportError as err:
        raise DeployError(f"video models need PyAV to decode videos (pip install 'av>=18.1,<19'): {err}") from None
    return av


class VideoFile:
    """An open video: ``total_frames``, ``avg_fps``, ``frames(inds)``, ``close()`` (also a context manager).

    Args:
        path: the video file.
        num_threads: FFmpeg decoding threads (0: FFmpeg's choice).

    Raises:
        DeployError: missing file, no video stream, no frames, truncated file (fewer packets than the header
            lists), or any FFmpeg error, naming the file.
    """

    def __init__(self, path: str, num_threads: int = 0) -> None:
        self.path = str(path)
        self._container = None
        if not osp.isfile(self.path):
            raise DeployError(f"video file not found: {self.path}")
        av = _import_av()
        self._av_error = av.FFmpegError
        try:
            self._container = av.open(self.path, metadata_errors="ignore")
            if not self._container.streams.video:
                raise DeployError(f"{self.path}: the file has no video stream")
            self._stream = self._container.streams.video[0]
            self._stream.thread_count = int(num_threads)
            self._index()
        except DeployError:
            self.close()
            raise
        except Exception as err:  # noqa: BLE001 - FFmpeg raises many types; all mean "unreadable"
            self.close()
            raise DeployError(f"cannot open video {self.path}: {type(err).__name__}: {err}") from None

    def _index(self) -> None:
        pts, key = [], []
        for packet in self._container.demux(self._stream):
            if packet.pts is None or packet.size == 0:  # the flushing packet at the end has no data
                continue
            pts.append(packet.pts)
            key.append(packet.is_keyframe)
        if not pts:
            raise DeployError(f"{self.path}: the video stream holds no frames")
        listed = int(self._stream.frames or 0)
        if listed > len(pts):
            raise DeployError(f"{self.path}: truncated file: the header lists {listed} frames, the file holds "
                              f"{len(pts)}")
        order = np.argsort(np.asarray(pts, dtype=np.int64), kind="stable")
        self._pts = np.asarray(pts, dtype=np.int64)[order]
        key_pos = np.flatnonzero(np.asarray(key, dtype=bool)[order])
        self._key_pos = key_pos if key_pos.size and key_pos[0] == 0 else np.concatenate([[0], key_pos])
        self._pos_of_pts = {int(p): i for i, p in enumerate(self._pts)}
        self.total_frames = int(self._pts.size)
        rate = self._stream.average_rate or self._stream.guessed_rate
        self.avg_fps = float(rate) if rate else 0.0

    def _keyframe_before(self, pos: int) -> int:
        return int(self._key_pos[np.searchsorted(self._key_pos, pos, side="right") - 1])

    def frames(self, inds: Sequence[int] | np.ndarray) -> list[np.ndarray]:
        """The frames at 0-based ``inds`` (any order, repeats allowed).

        Args:
            inds: int [N] frame indices in [0, total_frames - 1].

        Returns:
            N HxWx3 uint8 BGR arrays, ``out[k]`` being frame ``inds[k]`` (a repeated index shares its array).
        """
        inds = np.asarray(inds, dtype=np.int64).reshape(-1)
        if inds.size and (inds.min() < 0 or inds.max() >= self.total_frames):
            raise DeployError(f"{self.path}: frame indices must be in [0, {self.total_frames - 1}], got "
                              f"{inds.min()}..{inds.max()}")
        wanted = np.unique(inds)
        runs: dict[int, list[int]] = {}
        for pos in wanted.tolist():  # frames decodable from one keyframe form one run
            runs.setdefault(self._keyframe_before(pos), []).append(pos)
        decoded: dict[int, np.ndarray] = {}
        try:
            for key, positions in runs.items():
                self._decode_run(key, positions, decoded)
        except self._av_error as err:
            raise DeployError(f"cannot decode video {self.path}: {type(err).__name__}: {err}") from None
        return [decoded[int(i)] for i in inds]

    def _decode_run(self, key: int, positions: list[int], out: dict[int, np.ndarray]) -> None:
        """Seek to keyframe ``key`` and decode forward until the last of ``positions`` (sorted)."""
        self._container.seek(int(self._pts[key]), stream=self._stream, backward=True, any_frame=False)
        want, last = set(positions), positions[-1]
        for frame in self._container.decode(self._stream):
            pos = self._pos_of_pts.get(frame.pts, -1) if frame.pts is not None else -1
            if pos in want:
                out[pos] = frame.to_ndarray(format="bgr24")
            if pos >= last:
                break
        missing = want - set(out)
        if missing:
            raise DeployError(f"{self.path}: frame {min(missing)} of {self.total_frames} could not be decoded "
                              "(truncated or damaged file)")

    def close(self) -> None:
        """Release the file (idempotent)."""
        container, self._container = getattr(self, "_container", None), None
        if container is not None:
            container.close()

    def __enter__(self) -> VideoFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
