"""The PyAV video reader of oars: chosen frames of a video file by index (torch-free; training subclasses it).

Frame ``i`` is the frame with the ``i``-th smallest presentation timestamp among the stream's packets (B-frames
and variable frame rates included). Opening demuxes the stream once (packets only) to list the timestamps and the
keyframes; ``frames(inds)`` then seeks to the keyframe at or before a wanted frame only when the decoder cannot
reach it by decoding forward from where it already is, so only the needed runs are decoded and the whole video is
never in memory. Frames are HxWx3 uint8 BGR, converted by one ``VideoReformatter`` per file.

Why one implementation: the deployed predictor must see the frames evaluation saw, so
``video.datasets.decoders.PyAVReader`` (the training decoder) is this class with ``oars.errors`` error classes;
this module never imports training code. PyAV is optional for oars_deploy (its ``video`` extra) and is imported
when a video is opened (:func:`oars_deploy.extras.require_extra`: one line naming the extra when it is missing).
"""

from __future__ import annotations

import os.path as osp
from collections.abc import Sequence

import numpy as np

from oars_deploy.clips.inputs import not_a_video, still_image_demuxer, still_image_message
from oars_deploy.errors import DeployError, UserError
from oars_deploy.extras import require_extra


def check_frame_indices(inds: Sequence[int] | np.ndarray, total_frames: int, path: str,
                        error: type[UserError] = DeployError) -> np.ndarray:
    """Frame indices as int64 [N], or ``error`` naming ``path`` when they are not 1-D integers in range.

    Args:
        inds: int sequence or np.ndarray [N] of 0-based frame indices.
        total_frames: how many frames the video holds.
        path: the video, for the message.
        error: the exception class to raise (DeployError here, DataError for training readers).

    Returns:
        int64 np.ndarray [N], ``inds`` unchanged in order.
    """
    arr = np.asarray(inds)
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
        raise error(f"{path}: frame indices must be a 1-D integer sequence, got {arr.dtype} array of shape "
                    f"{arr.shape}")
    if arr.size and (arr.min() < 0 or arr.max() >= total_frames):
        bad = arr[(arr < 0) | (arr >= total_frames)]
        raise error(f"{path}: frame index {int(bad[0])} is outside [0, {total_frames - 1}] (the video has "
                    f"{total_frames} frames)")
    return arr.astype(np.int64)


class VideoFile:
    """An open video: ``path``, ``total_frames``, ``avg_fps``, ``frames(inds)``, ``decoded_frames``, ``close()``.

    A context manager; ``close`` is idempotent. ``decoded_frames`` counts every frame FFmpeg decoded (tests use
    it to show that seeking happens). Subclasses choose the errors they raise with the class attributes
    ``data_error`` (a bad or unreadable file) and ``setup_error`` (PyAV not installed).

    Args:
        path: the video file.
        num_threads: FFmpeg decoding threads (0: FFmpeg's choice; 1 suits DataLoader workers).

    Raises:
        data_error: missing file, a still image (PNG, JPEG, ... whatever its suffix: FFmpeg would open it as a
            one-frame video) or a frame-feature file (:mod:`oars_deploy.clips.inputs`), no video stream, no frames,
            truncated file (fewer packets than the header lists; a container that lists no count, such as
            Matroska / WebM or a fragmented MP4, cannot be checked: its frames are the packets it holds), or any
            FFmpeg error, naming the file. The stream reader (:mod:`oars_deploy.streams.source`) applies the same
            rule to a file read front to back.
        setup_error: PyAV is not installed.
    """

    data_error: type[UserError] = DeployError
    setup_error: type[Exception] = DeployError

    def __init__(self, path: str, num_threads: int = 0) -> None:
        self.path = str(path)
        self._container = None
        self.decoded_frames = 0
        if not osp.isfile(self.path):
            raise self.data_error(f"video file not found: {self.path}")
        reason = not_a_video(self.path)
        if reason is not None:
            raise self.data_error(reason)
        av = require_extra("av", "decoding videos", self.setup_error)
        self._av_error = av.FFmpegError
        try:
            self._container = av.open(self.path, metadata_errors="ignore")
            if not self._container.streams.video:
                raise self.data_error(f"{self.path}: the file has no video stream")
            self._stream = self._container.streams.video[0]
            kind = still_image_demuxer(self._container.format.name, self._stream.codec_context.name)
            if kind is not None:  # an image format the byte signatures do not list
                raise self.data_error(still_image_message(self.path, kind))
            self._stream.thread_count = int(num_threads)
            # one colour converter for all frames: a frame's own to_ndarray(format=...) sets up a new one each time
            self._reformatter = av.video.reformatter.VideoReformatter()
            self._build_index()
        except self.data_error:
            self.close()
            raise
        except Exception as err:  # noqa: BLE001 - FFmpeg raises many types; all mean "unreadable"
            self.close()
            raise self.data_error(f"cannot open video {self.path}: {type(err).__name__}: {err}") from None

    def _build_index(self) -> None:
        """List the packets' presentation timestamps (sorted: frame numbers) and keyframe positions.

        Demuxing reads packets only, no decoding (``stream.index_entries`` would be cheaper but holds decoding
        timestamps, not presentation ones).
        """
        pts, key = [], []
        for packet in self._container.demux(self._stream):
            if packet.pts is None or packet.size == 0:  # the flushing packet at the end has no data
                continue
            pts.append(packet.pts)
            key.append(packet.is_keyframe)
        if not pts:
            raise self.data_error(f"{self.path}: the video stream holds no frames")
        listed = int(self._stream.frames or 0)  # the container's own count (0 when it keeps none, e.g. MKV)
        if listed > len(pts):
            raise self.data_error(f"{self.path}: truncated file: the header lists {listed} frames, the file holds "
                                  f"{len(pts)}")
        order = np.argsort(np.asarray(pts, dtype=np.int64), kind="stable")
        self._pts = np.asarray(pts, dtype=np.int64)[order]
        # a keyframe packet starts a decodable run; its position in presentation order is where seeking lands
        key_pos = np.flatnonzero(np.asarray(key, dtype=bool)[order])
        self._key_pos = key_pos if key_pos.size and key_pos[0] == 0 else np.concatenate([[0], key_pos])
        self._pos_of_pts = {int(p): i for i, p in enumerate(self._pts)}
        self.total_frames = int(self._pts.size)
        rate = self._stream.average_rate or self._stream.guessed_rate
        if rate:
            self.avg_fps = float(rate)
        else:
            span = float((self._pts[-1] - self._pts[0]) * self._stream.time_base) if self.total_frames > 1 else 0
            self.avg_fps = (self.total_frames - 1) / span if span > 0 else 0.0

    def _keyframe_before(self, pos: int) -> int:
        return int(self._key_pos[np.searchsorted(self._key_pos, pos, side="right") - 1])

    def frames(self, inds: Sequence[int] | np.ndarray) -> list[np.ndarray]:
        """The frames at 0-based ``inds`` (any order, repeats allowed).

        Args:
            inds: int sequence or np.ndarray [N] of frame indices in ``[0, total_frames - 1]``.

        Returns:
            list of N HxWx3 uint8 BGR arrays, ``out[k]`` being frame ``inds[k]`` (a repeated index shares its
            array: treat the frames as read-only or copy them).
        """
        inds = check_frame_indices(inds, self.total_frames, self.path, self.data_error)
        decoded = self._decode_sorted(np.unique(inds))
        return [decoded[int(i)] for i in inds]

    def _decode_sorted(self, unique: np.ndarray) -> dict[int, np.ndarray]:
        """Frames at the sorted, distinct, in-range positions ``unique`` (int [M]) -> {position: BGR array}."""
        out: dict[int, np.ndarray] = {}
        wanted = [int(i) for i in unique]
        k = 0
        last = -1  # presentation position of the last frame decoded since the last seek
        frames = None
        try:
            while k < len(wanted):
                key = self._keyframe_before(wanted[k])
                if frames is None or key > last + 1:
                    # a keyframe lies between the decoder's position and the target: jump to it
                    self._container.seek(int(self._pts[key]), stream=self._stream, backward=True, any_frame=False)
                    frames = self._container.decode(self._stream)
                    last = -1
                for frame in frames:
                    self.decoded_frames += 1
                    pos = self._pos_of_pts.get(frame.pts, -1) if frame.pts is not None else -1
                    if pos < wanted[k]:  # before the target (or a frame the index does not know)
                        last = max(last, pos)
                        continue
                    if pos > wanted[k]:
                        raise self.data_error(f"{self.path}: frame {wanted[k]} of {self.total_frames} could not "
                                              "be decoded (damaged stream)")
                    last = pos
                    out[pos] = self._reformatter.reformat(frame, format="bgr24").to_ndarray()
                    k += 1
                    if k == len(wanted) or self._keyframe_before(wanted[k]) > pos + 1:
                        break
                else:
                    raise self.data_error(f"{self.path}: the stream ended before frame {wanted[k]} of "
                                          f"{self.total_frames} (truncated or damaged file)")
        except self._av_error as err:
            raise self.data_error(f"cannot decode video {self.path}: {type(err).__name__}: {err}") from None
        return out

    def count_decodable_frames(self) -> int:
        """Decode the whole stream once (one frame in memory at a time) and return how many frames came out;
        raises ``data_error`` on a decoding error. Used by ``check_videos`` to find truncated files."""
        n = 0
        try:
            self._container.seek(int(self._pts[0]), stream=self._stream, backward=True, any_frame=False)
            for _ in self._container.decode(self._stream):
                n += 1
        except self._av_error as err:
            raise self.data_error(f"cannot decode video {self.path} (after {n} frames): {type(err).__name__}: "
                                  f"{err}") from None
        self.decoded_frames += n
        return n

    def close(self) -> None:
        """Release the file (idempotent)."""
        container, self._container = getattr(self, "_container", None), None
        if container is not None:
            container.close()

    def __enter__(self) -> VideoFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
