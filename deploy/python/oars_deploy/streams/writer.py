"""Encode BGR frames into an H.264 MP4 one frame at a time with PyAV (torch-free).

Why here: the stream predictor writes its annotated video while it reads (a stream has no end to wait for, and a
long video must never sit in memory), and the training side's demo-video generator (``video.demo_data``) writes its
clips with the same encoder settings, so one class serves both.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np

from oars_deploy.errors import DeployError
from oars_deploy.extras import require_extra


def available_codec() -> str:
    """``'libx264'`` when PyAV's FFmpeg has it, else ``'mpeg4'`` (every FFmpeg build has that one)."""
    av = require_extra("av", "writing videos")

    return "libx264" if "libx264" in av.codecs_available else "mpeg4"


def even_frame(img: np.ndarray) -> np.ndarray:
    """``img`` (HxWx3 uint8) padded by one black row / column where H or W is odd: yuv420p needs even sizes.

    Returns:
        np.ndarray: H' x W' x 3 uint8 with H', W' even (``img`` itself when already even).
    """
    h, w = img.shape[:2]
    if h % 2 == 0 and w % 2 == 0:
        return img
    return np.pad(img, ((0, h % 2), (0, w % 2), (0, 0)))


class VideoWriter:
    """An MP4 written frame by frame: ``write(frame)`` then ``close()`` (or use it as a context manager).

    Args:
        path: the output file (its folder must exist).
        fps: frame rate written in the container (a float such as 29.97 is kept as a fraction).
        codec: ``'libx264'`` or ``'mpeg4'``; None picks :func:`available_codec`.
        gop: keyframe interval in frames (small values make seeking cheap).
        crf: libx264 quality (lower is closer to the input).
        faststart: put the index (moov atom) before the frames, as streaming sites do.

    The frame size is fixed by the first frame (padded to even sizes); a later frame of another size is a
    :class:`DeployError`. One encoding thread and fixed options, so the same frames give the same bytes.
    """

    def __init__(self, path: str | Path, fps: float, codec: str | None = None, gop: int = 8, crf: int = 18,
                 faststart: bool = False) -> None:
        av = require_extra("av", "writing videos")
        self._av = av
        self.path = str(path)
        self.codec = codec or available_codec()
        self.fps = Fraction(fps).limit_denominator(1001) if fps and fps > 0 else Fraction(25)
        self.gop, self.crf = int(gop), int(crf)
        self.frames_written = 0
        self._size: tuple[int, int] | None = None
        self._stream = None
        self._container = av.open(self.path, "w", options={"movflags": "faststart"} if faststart else None)

    def _open_stream(self, h: int, w: int) -> None:
        stream = self._container.add_stream(self.codec, rate=self.fps)
        stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
        stream.codec_context.gop_size = self.gop
        if self.codec == "libx264":
            # mbtree off: with it, libx264 encoded the same frames into different bytes (and pixels of the first
            # GOP) from run to run, so the demo video sets, and the models trained on them, were not reproducible
            stream.options = {"crf": str(self.crf), "preset": "veryfast", "threads": "1", "x264-params": "mbtree=0"}
        else:
            stream.options = {"qscale": "2", "threads": "1"}
            stream.codec_context.bit_rate = 0
        self._stream, self._size = stream, (h, w)

    def write(self, frame: np.ndarray) -> None:
        """Append one HxWx3 uint8 BGR frame."""
        if frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype != np.uint8:
            raise DeployError(f"{self.path}: a frame must be HxWx3 uint8 BGR, got {frame.shape} {frame.dtype}")
        frame = even_frame(frame)
        if self._stream is None:
            self._open_stream(*frame.shape[:2])
        elif frame.shape[:2] != self._size:
            raise DeployError(f"{self.path}: every frame must be {self._size[0]}x{self._size[1]} (the first "
                              f"frame's size), got {frame.shape[0]}x{frame.shape[1]}")
        video_frame = self._av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="bgr24")
        for packet in self._stream.encode(video_frame):
            self._container.mux(packet)
        self.frames_written += 1

    def close(self) -> None:
        """Flush the encoder and close the file (idempotent)."""
        container, self._container = self._container, None
        if container is None:
            return
        try:
            if self._stream is not None:
                for packet in self._stream.encode():
                    container.mux(packet)
        finally:
            container.close()

    def __enter__(self) -> VideoWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
