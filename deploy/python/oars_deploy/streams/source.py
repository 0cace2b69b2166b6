"""Frames of a video file, a URL FFmpeg opens (http, rtsp, ...) or a camera, read in order with PyAV (torch-free).

Why a reader of its own (beside :class:`oars_deploy.clips.decode.VideoFile`): a clip model picks frames by index
and needs the whole index first; a stream is read once, front to back, and may have no end (a camera, a live URL),
so nothing is listed in advance and one frame is in memory at a time. Frames come with their presentation time in
seconds (the stream's own timestamps, not ``index / fps``, so variable frame rates and dropped frames keep true
times).
"""

from __future__ import annotations

import os.path as osp
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from oars_deploy.clips.inputs import VIDEO_SUFFIXES, not_a_video
from oars_deploy.errors import DeployError
from oars_deploy.extras import require_extra
from oars_deploy.streams.ending import StreamEnd

URL_SCHEMES = ("http", "https", "rtsp", "rtsps", "rtmp", "udp", "tcp", "srt")
_URL = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")


@dataclass(frozen=True)
class StreamSource:
    """What ``-i`` names when it is a stream.

    Attributes:
        kind: ``'file'`` (a video file), ``'url'`` (FFmpeg opens it: http, rtsp, ...) or ``'camera'``.
        location: the path, the URL, or the camera device (``/dev/video<N>`` on Linux).
        name: a short name for output files (the file's stem, ``stream`` or ``camera<N>``).
    """

    kind: str
    location: str
    name: str


def stream_source(value: str | None) -> StreamSource | None:
    """The stream ``-i value`` names, or None when it is something else (an image, a folder, a feature file).

    A camera is a bare index (``0``, ``1`` ...), a URL has one of :data:`URL_SCHEMES`, a file has a video suffix
    (:data:`oars_deploy.clips.inputs.VIDEO_SUFFIXES`). A missing video file is still a stream source: opening it
    says it is missing.
    """
    if value is None:
        return None
    if value.isdigit():
        index = int(value)
        device = f"/dev/video{index}" if sys.platform.startswith("linux") else str(index)
        return StreamSource("camera", device, f"camera{index}")
    match = _URL.match(value)
    if match:
        if match.group(1).lower() not in URL_SCHEMES:
            raise DeployError(f"-i {value}: unsupported URL scheme {match.group(1)!r}; streams take "
                              f"{', '.join(URL_SCHEMES)} URLs, a video file or a camera index")
        tail = value.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        stem = osp.splitext(tail)[0] if tail and "." in tail else "stream"
        return StreamSource("url", value, stem)
    if value.lower().endswith(VIDEO_SUFFIXES) and not osp.isdir(value):
        return StreamSource("file", value, osp.splitext(osp.basename(value))[0])
    return None


@dataclass
class StreamFrame:
    """One decoded frame: ``index`` (0-based, in decoding order), ``time`` (seconds), ``image`` (HxWx3 uint8 BGR)."""

    index: int
    time: float
    image: np.ndarray


class FrameStream:
    """An open stream: ``fps`` (the stream's average rate, 0 when unknown), ``size`` (H, W), iteration over
    :class:`StreamFrame` in order, ``close()``, and after the iteration :meth:`early_end` (a truncated file, a
    decoding error). A context manager.

    Attributes:
        declared_frames: the frame count a file's header declares (MP4 / MOV sample count, AVI header), None when
            it declares none or for live sources: no truncation check then.
        frames_read: frames decoded so far. packets_read: video packets read so far (with data).
        finished: the iteration reached the end of the stream (not stopped by its caller).
        error: the decoding error that ended the stream, or None.

    Args:
        source: what to open (:func:`stream_source`).
        timeout_s: network sources: give up when the server does not answer for this long.

    Raises:
        DeployError: PyAV missing, the file missing or not a video, no video stream, or FFmpeg cannot open it
            (naming the source).
    """

    def __init__(self, source: StreamSource, timeout_s: float = 10.0) -> None:
        self.source = source
        av = require_extra("av", "reading video streams")
        self._av_error = av.FFmpegError
        options: dict[str, str] = {}
        fmt = None
        if source.kind == "file":
            if not osp.isfile(source.location):
                raise DeployError(f"video file not found: {source.location}")
            reason = not_a_video(source.location)
            if reason is not None:
                raise DeployError(reason)
        elif source.kind == "url":
            options["rw_timeout"] = str(int(timeout_s * 1e6))  # microseconds, for http and rtsp alike
        elif sys.platform.startswith("linux"):
            fmt = "v4l2"
        try:
            self._container = av.open(source.location, format=fmt, options=options, timeout=timeout_s,
                                      metadata_errors="ignore")
        except Exception as err:  # noqa: BLE001 - FFmpeg raises many types; all mean "cannot open"
            raise DeployError(f"cannot open {source.kind} {source.location}: {type(err).__name__}: {err}") from None
        if not self._container.streams.video:
            self.close()
            raise DeployError(f"{source.location}: no video stream")
        self._stream = self._container.streams.video[0]
        self._stream.thread_type = "AUTO"
        rate = self._stream.average_rate or self._stream.guessed_rate
        self.fps = float(rate) if rate else 0.0
        self.size = (int(self._stream.codec_context.height), int(self._stream.codec_context.width))
        self._reformatter = av.video.reformatter.VideoReformatter()
        declared = int(self._stream.frames or 0) if source.kind == "file" else 0
        self.declared_frames: int | None = declared if declared > 0 else None
        self.frames_read = self.packets_read = 0
        self.finished = False
        self.error: str | None = None

    def __iter__(self) -> Iterator[StreamFrame]:
        """The frames in decoding order. A decoding error ends the iteration (no exception: :meth:`early_end`
        says why), keeping the frames given so far; running out of packets ends it too, and :meth:`early_end`
        compares what came with what the header declared."""
        self.frames_read = self.packets_read = 0
        self.finished, self.error = False, None
        try:
            for packet in self._container.demux(self._stream):
                if packet.size:  # the empty packet at the end flushes the decoder
                    self.packets_read += 1
                for frame in packet.decode():
                    yield self._frame(frame)
        except self._av_error as err:  # a damaged packet, or a network source that broke off
            self.error = f"{type(err).__name__}: {err}"
            yield from self._drain()
        self.finished = True

    def _frame(self, frame) -> StreamFrame:
        """One decoded ``av.VideoFrame`` as the next :class:`StreamFrame` (counted in ``frames_read``)."""
        index = self.frames_read
        time = float(frame.time) if frame.time is not None else (index / self.fps if self.fps else 0.0)
        self.frames_read += 1
        return StreamFrame(index, time, self._reformatter.reformat(frame, format="bgr24").to_ndarray())

    def _drain(self) -> Iterator[StreamFrame]:
        """After a decoding error: the frames still inside the decoder (its other threads' work), when it gives
        them; a second error is the same damage and ends the stream."""
        try:
            for frame in self._stream.decode(None):
                yield self._frame(frame)
        except self._av_error:
            return

    def early_end(self) -> StreamEnd | None:
        """How the stream stopped before its end, or None.

        None when the reading was stopped by its caller (``--max-frames``, Ctrl-C: the iteration never finished),
        when a file gave at least the packets its header declares, or when the header declares no count: a live
        source (camera, URL), or a container that keeps none (Matroska / WebM, fragmented MP4 give 0). The count
        compared is of packets, not decoded frames: an MP4's declared count is its sample count, and an edit list
        may drop decoded frames from an intact file. A decoding error is always an early end.
        """
        if self.error is not None:
            return StreamEnd(self.source.location, self.frames_read, self.declared_frames, self.error)
        if not self.finished or self.declared_frames is None or self.packets_read >= self.declared_frames:
            return None
        return StreamEnd(self.source.location, self.frames_read, self.declared_frames)

    def close(self) -> None:
        """Release the source (idempotent)."""
        container, self._container = getattr(self, "_container", None), None
        if container is not None:
            container.close()

    def __enter__(self) -> FrameStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
