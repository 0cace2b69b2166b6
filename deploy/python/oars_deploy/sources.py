"""What a ``predict(source)`` call may be handed, as one item at a time: shared by the torch-free
:class:`oars_deploy.predictor.Predictor` and ``oars.Model.predict``, so both take the same sources and say the same
thing about a bad one.

A source is an image file, a folder of images (sorted), a glob pattern (``imgs/*.jpg``, ``**`` recursive), a
``.txt``/``.lst`` list of files, a video file (read frame by frame when ``video_frames``), a BGR uint8
``[H, W, 3]`` array, or a list of these. Everything is checked and listed first (a missing file or an empty folder
fails before any prediction); images and frames are read only when their item is reached, so iterating keeps one
image in memory however long the folder or the video is.
"""

from __future__ import annotations

import os
import os.path as osp
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from oars_deploy.errors import DeployError
from oars_deploy.image_files import list_images, listed_files
from oars_deploy.output_paths import output_stems
from oars_deploy.suffixes import VIDEO_SUFFIXES

__all__ = ["SourceItem", "check_image_array", "iter_sources"]


@dataclass
class SourceItem:
    """One input.

    Attributes:
        name: the file (an image, or the video a frame comes from) or ``array_<i>``.
        image: BGR uint8 [H, W, 3]; None for a file that is read when needed (by the caller's loader).
        stem: the unique output name of its pictures (:func:`oars_deploy.output_paths.output_stems`; a frame:
            ``<video stem>_<index>``, an array: ``array_<i>``).
        frame: the frame index for a video's frame, else None.
    """

    name: str
    image: np.ndarray | None
    stem: str
    frame: int | None = None


def check_image_array(array: Any, name: str) -> np.ndarray:
    """``array`` as the loaders give images: uint8 ``[H, W, 3]`` BGR (contiguous).

    Raises:
        DeployError: not a NumPy array, not HxWx3, or not uint8 (a float image in [0, 1] would be predicted as
            black), naming ``name``.
    """
    if not isinstance(array, np.ndarray):
        raise DeployError(f"{name}: expected a BGR uint8 [H, W, 3] NumPy array or a file path, got "
                          f"{type(array).__name__}")
    if array.ndim != 3 or array.shape[2] != 3 or min(array.shape[:2]) < 1:
        raise DeployError(f"{name}: expected a BGR uint8 image of shape [H, W, 3], got shape {list(array.shape)}")
    if array.dtype != np.uint8:
        raise DeployError(f"{name}: expected a BGR uint8 image (0-255, as cv2.imread gives), got dtype {array.dtype}")
    return np.ascontiguousarray(array)


def _is_video(path: str) -> bool:
    return path.lower().endswith(VIDEO_SUFFIXES)


def _plan(source: Any, caller: str, video_frames: bool) -> list[tuple[str, Any]]:
    """``[('array', (i, array)) | ('file', path) | ('frames', video path)]`` for every input, checked (nothing read)."""
    items = list(source) if isinstance(source, (list, tuple)) else [source]
    if not items:
        raise DeployError(f"{caller}: nothing to predict (an empty list)")
    plan: list[tuple[str, Any]] = []
    for i, item in enumerate(items):
        if isinstance(item, np.ndarray):
            plan.append(("array", (i, check_image_array(item, f"{caller} input {i}"))))
            continue
        if not isinstance(item, (str, os.PathLike)):
            raise DeployError(f"{caller}: input {i} is a {type(item).__name__}; expected a file or folder path, a glob "
                              "pattern or a BGR uint8 [H, W, 3] NumPy array")
        path = os.fspath(item)
        listed = listed_files(path, flag=caller)
        if listed is not None:
            if not listed:
                raise DeployError(f"{caller}: the pattern {path!r} matches no file")
            plan.extend(("frames" if video_frames and _is_video(p) else "file", p) for p in listed)
        elif osp.isdir(path):
            plan.extend(("file", p) for p in list_images(path))
        elif osp.isfile(path):
            plan.append(("frames" if video_frames and _is_video(path) else "file", path))
        else:
            raise DeployError(f"{caller}: no such file or folder: {path}")
    return plan


def iter_sources(source: Any, caller: str = "Predictor", video_frames: bool = True) -> Iterator[SourceItem]:
    """The inputs of ``source`` (see the module docstring), one :class:`SourceItem` at a time.

    Args:
        source: what ``predict`` was given. caller: how messages name the call (``Model.predict``).
        video_frames: read a video file's frames as images (image models); False passes the file as one input
            (a clip classifier reads it itself).

    Returns:
        An iterator; the whole source is checked before this returns (the frames are not read yet).

    Raises:
        DeployError: a path that does not exist, an empty folder or pattern, a bad array or another type (naming
            it).
    """
    plan = _plan(source, caller, video_frames)
    stems = output_stems([p for kind, p in plan if kind != "array"], names=("{stem}",), input_flag=caller)
    return _items(plan, stems)


def _items(plan: Sequence[tuple[str, Any]], stems: dict[str, str]) -> Iterator[SourceItem]:
    for kind, value in plan:
        if kind == "array":
            i, array = value
            yield SourceItem(f"array_{i}", array, f"array_{i}")
        elif kind == "file":
            yield SourceItem(value, None, stems[value])
        else:
            yield from video_frames_of(value, stems[value])


def video_frames_of(path: str, stem: str) -> Iterator[SourceItem]:
    """The frames of the video ``path``, read one at a time with the runtime's stream reader
    (:class:`oars_deploy.streams.source.FrameStream`), as items named after the video with their index."""
    from oars_deploy.streams.source import FrameStream, stream_source

    with FrameStream(stream_source(path)) as frames:
        for frame in frames:
            yield SourceItem(path, frame.image, f"{stem}_{frame.index:06d}", frame.index)
