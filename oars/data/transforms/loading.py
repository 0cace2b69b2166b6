"""Read images (OpenCV) and label maps (PIL) from disk under one orientation rule.

The rule: a file's EXIF orientation tag is applied to it, so every file is read the way an image viewer (and an
annotation tool) shows it. OpenCV's ``imread`` does that for colour and greyscale reads; ``IMREAD_UNCHANGED``
and PIL do not, so ``apply_orientation`` does it for them. Without one rule a phone photo (orientation 6) was
read rotated while its label map was not, and every pixel of the mask was wrong.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

import cv2
import numpy as np
from PIL import Image

from oars.data import storage
from oars.errors import DataError, DataFileNotFoundError
from oars.registry import TRANSFORMS
from oars_deploy.image_files import unreadable_image_message
from oars_deploy.image_header import ImageHeaderError, image_header
from oars_deploy.image_limits import MAX_FILE_PIXELS, file_size_problem

_COLOR_FLAGS = {
    'color': cv2.IMREAD_COLOR,
    'grayscale': cv2.IMREAD_GRAYSCALE,
    'unchanged': cv2.IMREAD_UNCHANGED,
}
_ORIENTATION_TAG = 0x0112
# EXIF orientation -> what turns the stored pixels into the displayed ones (1 = nothing).
_ORIENTATION_OPS = {
    2: lambda a: a[:, ::-1],
    3: lambda a: a[::-1, ::-1],
    4: lambda a: a[::-1],
    5: lambda a: a.swapaxes(0, 1),
    6: lambda a: np.rot90(a, -1),
    7: lambda a: np.rot90(a, 1)[:, ::-1],
    8: lambda a: np.rot90(a, 1),
}


# The files of the sample being decoded from a shard (oars.data.shards): path -> the member's bytes. read_image and
# read_label_map look here first, so a task's loading transforms read a shard member through the same code path as
# a file, without knowing shards exist.
_MEMBER_BYTES: ContextVar[Mapping[str, bytes] | None] = ContextVar('member_bytes', default=None)


@contextmanager
def files_in_memory(files: Mapping[str, bytes]) -> Iterator[None]:
    """Within the block, :func:`read_image` and :func:`read_label_map` of a path in ``files`` decode its bytes
    instead of opening it (what :class:`oars.data.shards.ShardDataset` sets around a sample's pipeline).

    Args:
        files: the virtual paths the sample's data info names -> their bytes.
    """
    token = _MEMBER_BYTES.set(files)
    try:
        yield
    finally:
        _MEMBER_BYTES.reset(token)


def _orientation(im: Image.Image) -> int:
    value = im.getexif().get(_ORIENTATION_TAG, 1)
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def exif_orientation(path: str | io.BytesIO) -> int:
    """The EXIF orientation (1..8, 1 = as stored) of an image file (or its bytes); 1 when it has none or PIL cannot
    tell."""
    try:
        with Image.open(path) as im:
            return _orientation(im)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError):
        return 1


def apply_orientation(arr: np.ndarray, orientation: int) -> np.ndarray:
    """``arr`` (H×W or H×W×C) as displayed under EXIF ``orientation``: 2 mirror, 3 rotate 180, 4 flip, 5 transpose,
    6 rotate 90° clockwise, 7 transverse, 8 rotate 90° counter-clockwise (what OpenCV's imread and PIL's
    ``ImageOps.exif_transpose`` do). Returns ``arr`` itself for 1 (or no tag), else a contiguous copy."""
    op = _ORIENTATION_OPS.get(int(orientation))
    return arr if op is None else np.ascontiguousarray(op(arr))


def _check_declared_size(path: str, corrupt_is_problem: bool = True) -> None:
    """Refuse a file whose header declares more pixels than any image is allowed (a decompression bomb: a 50 kB
    PNG can declare 20000 x 20000), before a decoder allocates it; the runtime's one rule
    (:func:`oars_deploy.image_limits.file_size_problem`), raised as a :class:`DataError` naming the file."""
    problem = file_size_problem(path, corrupt_is_problem=corrupt_is_problem)
    if problem is not None:
        raise DataError(problem)


def _check_declared_size_of_bytes(data: bytes, url: str, corrupt_is_problem: bool = True) -> None:
    """:func:`_check_declared_size` for the bytes of a file read from storage (``url`` named in the message)."""
    try:
        header = image_header(data)
    except ImageHeaderError as err:
        if err.format is None or not corrupt_is_problem:
            return
        raise DataError(f'{unreadable_image_message(url)} (its {err})') from None
    if header.pixels > MAX_FILE_PIXELS:
        raise DataError(f'{url}: image of {header.width}x{header.height} = {header.pixels} pixels (declared in its '
                        f'{header.format} header) exceeds the limit of {MAX_FILE_PIXELS} pixels for an input image; '
                        'refused before decoding (a decompression bomb, or downscale it first)')


def _read_url_image(url: str, color_type: str, data: bytes | None = None) -> np.ndarray:
    """``read_image`` of a URL: the bytes through ``oars.data.storage`` (its errors name the URL; ``data``: bytes
    already in memory), decoded by ``cv2.imdecode`` (which applies EXIF orientation for colour and greyscale, as
    ``imread`` does)."""
    data = storage.read_bytes(url) if data is None else data
    _check_declared_size_of_bytes(data, url)
    img = cv2.imdecode(np.frombuffer(data, np.uint8), _COLOR_FLAGS[color_type])
    if img is None:
        raise DataError(unreadable_image_message(url))
    if color_type == 'unchanged':
        img = apply_orientation(img, exif_orientation(io.BytesIO(data)))
    return img


def read_image(path: str, color_type: str = 'color') -> np.ndarray:
    """An image file (a local path, or a URL read through ``oars.data.storage``) as OpenCV decodes it (BGR for
    'color'), EXIF orientation applied (see the module docstring).

    Raises ``DataFileNotFoundError`` for a missing file and ``DataError`` for one OpenCV cannot decode or whose
    header declares more than ``oars_deploy.image_limits.MAX_FILE_PIXELS`` pixels, both naming the file.
    """
    path = os.fspath(path)
    in_memory = (_MEMBER_BYTES.get() or {}).get(path)
    if in_memory is not None:
        return _read_url_image(path, color_type, in_memory)
    if storage.is_url(path):
        return _read_url_image(path, color_type)
    if not os.path.isfile(path):
        raise DataFileNotFoundError(f'image file not found: {path}')
    _check_declared_size(path)
    img = cv2.imread(path, _COLOR_FLAGS[color_type])
    if img is None:
        raise DataError(unreadable_image_message(path))
    if color_type == 'unchanged':
        img = apply_orientation(img, exif_orientation(path))
    return img


_INDEX_MODES = {'P', 'L', '1', 'I', 'I;16', 'I;16B', 'I;16L'}


def read_label_map(path: str) -> np.ndarray:
    """Class ids of a label image (a local path or a URL) as PIL reads them (palette PNGs give indices, not the
    colours ``cv2.imread`` returns), EXIF orientation applied like the images'. H×W, uint8 for 8-bit and 1-bit files.

    Raises ``DataFileNotFoundError`` for a missing file and ``DataError`` naming the file for one that PIL cannot
    decode (corrupt, truncated, not an image) or that holds colours instead of class ids.
    """
    path = os.fspath(path)
    source: str | io.BytesIO = path
    in_memory = (_MEMBER_BYTES.get() or {}).get(path)
    if in_memory is not None or storage.is_url(path):
        data = storage.read_bytes(path) if in_memory is None else in_memory
        _check_declared_size_of_bytes(data, path, corrupt_is_problem=False)
        source = io.BytesIO(data)
    elif not os.path.isfile(path):
        raise DataFileNotFoundError(f'label map not found: {path}')
    else:
        _check_declared_size(path, corrupt_is_problem=False)  # PIL names a corrupt label map itself
    try:
        with Image.open(source) as im:
            if im.mode not in _INDEX_MODES:
                raise DataError(f'{path}: label map has PIL mode {im.mode!r} (colour); expected a single-channel '
                                f'class-index image (palette "P" or greyscale "L" PNG)')
            orientation = _orientation(im)
            seg = np.array(im)
    # PIL: UnidentifiedImageError, truncated data, bad chunks; DecompressionBombError (not an OSError) between its own
    # limit (179 Mpx) and ours
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as err:
        raise DataError(f'could not read label map (corrupt or not an image file: {err}): {path}') from None
    seg = seg.astype(np.uint8) if seg.dtype == bool else seg
    return apply_orientation(seg, orientation)


@TRANSFORMS.register_module()
class LoadImageFromFile:
    """Load ``results['img_path']`` with ``read_image``; set ``img`` (H×W×3 uint8 BGR for 'color'),
    ``img_shape`` and ``ori_shape`` (H, W).

    ``color_type``: 'color' | 'grayscale' | 'unchanged'. ``to_float32`` converts to float32.
    """

    def __init__(self, to_float32: bool = False, color_type: str = 'color') -> None:
        if color_type not in _COLOR_FLAGS:
            raise DataError(f'LoadImageFromFile: color_type {color_type!r} is not one of {list(_COLOR_FLAGS)}')
        self.to_float32 = to_float32
        self.color_type = color_type

    def __call__(self, results: dict) -> dict:
        path = results.get('img_path')
        if path is None:
            raise KeyError("LoadImageFromFile needs results['img_path']")
        img = read_image(path, self.color_type)
        if self.to_float32:
            img = img.astype(np.float32)
        results['img'] = img
        results['img_shape'] = tuple(int(s) for s in img.shape[:2])
        results['ori_shape'] = tuple(int(s) for s in img.shape[:2])
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}(to_float32={self.to_float32}, color_type={self.color_type!r})'
