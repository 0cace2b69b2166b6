"""One decoder interface for videos and frame folders: open, ``total_frames`` / ``avg_fps``, frames by index.

Why one interface: the loading transforms, ``tools/check_videos.py`` and the benchmark call the same three methods
whatever the backend, so that a backend is a config value (``backend: pyav|torchcodec``) and frame folders are
a third reader with the same contract. Every reader decodes only the frames it is asked for (seek to the keyframe
at or before a wanted frame, decode forward; a repeated index is decoded once) and never holds the whole video in
memory. Any failure (missing file, not a video, truncated stream, index past the end) is an
``oars.errors.DataError`` naming the file and the reason, so that ``on_bad_sample: skip`` and the check tool can
catch it. A still image (PNG, JPEG, ... whatever its suffix), which FFmpeg would open as a one-frame video, is
such an error for every backend: ``oars_deploy.clips.inputs`` recognises it, for the deployed predictor too.

Frames are returned as HxWx3 uint8 arrays in **BGR** order (OpenCV's, as the image tasks read them).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import cv2
import numpy as np

from oars.data import storage
from oars.errors import DataError, OarsError
from oars_deploy.clips.decode import VideoFile, check_frame_indices
from oars_deploy.clips.inputs import not_a_video

BACKENDS: tuple[str, ...] = ('pyav', 'torchcodec')


class BackendUnavailableError(OarsError, ImportError):
    """A decoding backend that cannot run here (not installed, or its FFmpeg libraries are missing).

    Not a ``DataError`` on purpose: ``on_bad_sample: skip`` must not skip every video because of a setup problem.
    """


def _torchcodec_decoder():
    """``torchcodec.decoders.VideoDecoder``, or ``BackendUnavailableError`` saying why it cannot be used."""
    hint = "install it with `pip install torchcodec` (it loads FFmpeg 4-9's shared libraries) or use backend: pyav"
    try:
        from torchcodec.decoders import VideoDecoder
    except Exception as err:  # noqa: BLE001 - ImportError, or OSError/RuntimeError from its native libraries
        raise BackendUnavailableError(f"backend 'torchcodec' is not installed here ({type(err).__name__}: "
                                      f"{str(err).splitlines()[0] if str(err) else ''}); {hint}") from None
    import torchcodec._core.ops as tc_ops  # where torchcodec records whether its FFmpeg libraries loaded

    if not getattr(tc_ops, '_FFMPEG_AVAILABLE', True):
        raise BackendUnavailableError("backend 'torchcodec' is installed but could not load FFmpeg's shared "
                                      f"libraries (libavutil, libavcodec, libavformat, libavdevice, ...); {hint}")
    return VideoDecoder


class VideoReader:
    """The interface: ``path``, ``total_frames`` (int), ``avg_fps`` (float), ``get_frames(inds)``, ``close()``.

    A reader is a context manager; ``close`` is idempotent. Readers are not picklable and are meant to live
    inside one ``__getitem__`` call (one DataLoader worker).
    """

    path: str
    total_frames: int
    avg_fps: float

    def get_frames(self, inds: Sequence[int] | np.ndarray) -> list[np.ndarray]:
        """The frames at 0-based ``inds`` (any order, repeats allowed).

        Args:
            inds: int sequence or np.ndarray [N] of frame indices in ``[0, total_frames - 1]``.

        Returns:
            list of N HxWx3 uint8 BGR arrays, ``out[k]`` being frame ``inds[k]`` (repeated indices share one
            array: treat the frames as read-only or copy them).
        """
        inds = self._check_inds(inds)
        unique = np.unique(inds)
        decoded = self._decode_sorted(unique)
        return [decoded[int(i)] for i in inds]

    def _decode_sorted(self, unique: np.ndarray) -> dict[int, np.ndarray]:
        raise NotImplementedError

    def _check_inds(self, inds: Sequence[int] | np.ndarray) -> np.ndarray:
        return check_frame_indices(inds, self.total_frames, self.path, DataError)

    def close(self) -> None:
        """Release the file (idempotent)."""

    def __enter__(self) -> VideoReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finaliser
            pass


def _require_video_file(path: str) -> None:
    """``DataError`` for a missing file, a still image or a frame-feature file (as ``PyAVReader`` refuses them)."""
    if not os.path.isfile(path):
        raise DataError(f'video file not found: {path}')
    reason = not_a_video(path)
    if reason is not None:
        raise DataError(reason)


class PyAVReader(VideoFile, VideoReader):
    """PyAV (FFmpeg) reader with a packet index: exact frame positions without decoding at open.

    The implementation is ``oars_deploy.clips.decode.VideoFile`` (the deployed predictor's decoder, so that
    training, evaluation and deployment number and convert frames alike), raising ``DataError`` for bad files and
    ``BackendUnavailableError`` when PyAV is missing. Opening demuxes the stream once (packets only) to list every
    frame's presentation timestamp and the keyframes (a file holding fewer packets than its header lists is
    refused as truncated): frame ``i`` is the ``i``-th smallest pts (presentation order, B-frames included), so
    indices are exact for variable frame rates too. ``get_frames`` seeks to the keyframe at or before a wanted
    frame only when it cannot be reached by decoding forward, and counts what it decoded in ``decoded_frames``;
    ``count_decodable_frames()`` decodes the whole stream (``check_videos``).

    Args:
        path: the video file.
        num_threads: FFmpeg decoding threads (0: FFmpeg's choice). 1 suits DataLoader workers, which already
            run in parallel.
    """

    data_error = DataError
    setup_error = BackendUnavailableError

    def __init__(self, path: str, num_threads: int = 1) -> None:
        super().__init__(path, num_threads)


class TorchCodecReader(VideoReader):
    """torchcodec reader (``torchcodec.decoders.VideoDecoder`` in exact seek mode; an optional dependency).

    torchcodec scans the file at open and seeks by itself; ``get_frames_at`` returns RGB frames, flipped here
    to BGR.

    Args:
        path: the video file.
        num_threads: FFmpeg decoding threads (``num_ffmpeg_threads``).
    """

    def __init__(self, path: str, num_threads: int = 1) -> None:
        self.path = str(path)
        self._decoder = None
        VideoDecoder = _torchcodec_decoder()  # noqa: N806 - a class
        _require_video_file(self.path)
        try:
            self._decoder = VideoDecoder(self.path, seek_mode='exact', dimension_order='NHWC',
                                         num_ffmpeg_threads=int(num_threads))
            meta = self._decoder.metadata
            self.total_frames = int(meta.num_frames or len(self._decoder))
            self.avg_fps = float(meta.average_fps or 0.0)
        except Exception as err:  # noqa: BLE001 - torchcodec raises RuntimeError/ValueError from FFmpeg
            self._decoder = None
            raise DataError(f'cannot open video {self.path}: {type(err).__name__}: {err}') from None
        if self.total_frames <= 0:
            raise DataError(f'{self.path}: the video stream holds no frames')

    def _decode_sorted(self, unique: np.ndarray) -> dict[int, np.ndarray]:
        try:
            batch = self._decoder.get_frames_at(unique.tolist()).data.numpy()  # [N, H, W, 3] RGB
        except Exception as err:  # noqa: BLE001
            raise DataError(f'cannot decode video {self.path}: {type(err).__name__}: {err}') from None
        return {int(i): np.ascontiguousarray(batch[k, :, :, ::-1]) for k, i in enumerate(unique)}

    def close(self) -> None:
        self._decoder = None


class RawFrameReader(VideoReader):
    """A folder of frame images ``frame_dir/filename_tmpl.format(index + start_index)``, read with OpenCV.

    ``start_index`` is the number of the first frame FILE (MMAction2's default 1: ``img_00001.jpg`` is frame
    index 0), so index ``i`` reads file number ``i + start_index``.

    Args:
        frame_dir: the folder: a local folder or a URL (each frame read through ``oars.data.storage``, its errors
            naming the URL).
        total_frames: how many frames the folder holds (from the annotation list).
        filename_tmpl: file name template, e.g. ``'img_{:05d}.jpg'``.
        start_index: number of the first file.
        avg_fps: frame rate to report (frame folders carry none; 30 as MMAction2 assumes).
    """

    def __init__(self, frame_dir: str, total_frames: int, filename_tmpl: str = 'img_{:05d}.jpg',
                 start_index: int = 1, avg_fps: float = 30.0) -> None:
        self.path = str(frame_dir)
        if not storage.isdir(self.path):
            raise DataError(f'frame folder not found: {self.path}')
        if isinstance(total_frames, bool) or int(total_frames) != total_frames or total_frames <= 0:
            raise DataError(f'{self.path}: total_frames must be a positive integer, got {total_frames!r}')
        try:
            filename_tmpl.format(int(start_index))
        except (IndexError, KeyError, ValueError) as err:
            raise DataError(f"filename_tmpl {filename_tmpl!r} cannot format a frame number: {err}") from None
        self.total_frames = int(total_frames)
        self.filename_tmpl = filename_tmpl
        self.start_index = int(start_index)
        self.avg_fps = float(avg_fps)

    def frame_path(self, ind: int) -> str:
        """The file of 0-based frame ``ind``."""
        return storage.join(self.path, self.filename_tmpl.format(int(ind) + self.start_index))

    def _decode_sorted(self, unique: np.ndarray) -> dict[int, np.ndarray]:
        out = {}
        for i in unique.tolist():
            path = self.frame_path(i)
            img = _read_frame(path)
            if img is None:
                why = 'not found' if not storage.listed_isfile(path) else 'not a readable image'
                raise DataError(f'frame {i} of {self.path}: {path} is {why} (filename_tmpl '
                                f'{self.filename_tmpl!r}, start_index {self.start_index})')
            out[i] = img
        return out


def _read_frame(path: str) -> np.ndarray | None:
    """A frame file decoded as ``cv2.imread`` decodes it (BGR), or None when it is missing or unreadable; a URL's
    bytes come through ``oars.data.storage`` (a missing object is None, as a missing file; another storage error
    is raised as its one-line message naming the URL)."""
    if not storage.is_url(path):
        return cv2.imread(path, cv2.IMREAD_COLOR)
    try:
        data = storage.read_bytes(path)
    except FileNotFoundError:
        return None
    return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)


def open_video(path: str, backend: str = 'pyav', num_threads: int = 1) -> VideoReader:
    """A reader of the video file ``path`` with ``backend`` (``'pyav'`` or ``'torchcodec'``). A URL is first copied
    into the storage cache (``oars.data.storage.local_copy``: FFmpeg seeks in a local file; the copy is kept and
    re-fetched only when the object's ETag changes).

    Raises:
        DataError: unknown backend, missing or unreadable file.
        BackendUnavailableError: torchcodec asked for but not usable here.
    """
    path = storage.local_copy(path)
    if backend == 'pyav':
        return PyAVReader(path, num_threads)
    if backend == 'torchcodec':
        return TorchCodecReader(path, num_threads)
    raise DataError(f'video backend must be one of {list(BACKENDS)}, got {backend!r}')


def torchcodec_available() -> bool:
    """Whether the torchcodec backend can run here (installed, with FFmpeg's libraries loaded)."""
    try:
        _torchcodec_decoder()
    except BackendUnavailableError:
        return False
    return True
