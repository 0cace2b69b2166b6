"""Reading labelme annotation files (one ``<stem>.json`` per image), shared by the converters of the tasks
(``detection.datasets.converters.labelme_to_coco``, ``segmentation.datasets.labelme.labelme_to_seg``).

Why one reader: both converters must agree on what a valid labelme file is (``imageHeight``/``imageWidth``
positive whole numbers, ``shapes`` a list, ``shape_type`` defaulting to ``polygon``, the number of points a
shape type needs) and must name the json file and the shape index in every error. What a converter does with
a shape it cannot use is its own policy: the segmentation converter stops on a bad shape, the detection
converter leaves it out and counts it in one warning (it catches the ``DataError`` of ``parse_shape``).
"""

from __future__ import annotations

import base64
import io
import json
import os
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from oars.data import storage
from oars.errors import DataError, DataFileNotFoundError

AREA_SHAPES: tuple[str, ...] = ('polygon', 'rectangle', 'circle', 'mask')
NO_AREA_SHAPES: tuple[str, ...] = ('point', 'points', 'line', 'linestrip')
MIN_POINTS: dict[str, int] = {'polygon': 3, 'rectangle': 2, 'circle': 2, 'mask': 2}


@dataclass
class LabelmeShape:
    """One checked shape with an area.

    Attributes:
        kind: its ``shape_type`` (one of ``AREA_SHAPES``).
        label: the class name, a non-empty str.
        points: [N, 2] float64 x, y in labelme's coordinates (pixel i spans [i, i + 1)); N >= ``MIN_POINTS``.
        mask: [h, w] bool patch of a ``mask`` shape (its top-left pixel at ``points[0]``), else None.
    """

    kind: str
    label: str
    points: np.ndarray
    mask: np.ndarray | None = None


@dataclass
class LabelmeFile:
    """The checked top level of one labelme file; ``shapes`` are the raw json entries (see ``parse_shape``).
    ``path`` is a ``Path`` for a local file, the URL string for a file on object storage."""

    path: Path | str
    height: int
    width: int
    image_path: str  # '' when the file names no image
    shapes: list[Any]

    def shape_at(self, index: int) -> str:
        """The start of an error about shape ``index``: ``labelme file <path>: shape <index>``."""
        return f'labelme file {self.path}: shape {index}'

    def image_location(self) -> str:
        """Where the image ``imagePath`` names lies (it is relative to the json; Windows separators accepted):
        the absolute, normalised local path, or for a json on object storage the URL beside it."""
        rel = self.image_path.replace('\\', '/')
        if isinstance(self.path, str) and storage.is_url(self.path):
            return storage.normpath(storage.join(posixpath.dirname(self.path), rel))
        return os.path.normpath(os.path.join(Path(self.path).parent.resolve(), rel))


def list_labelme_files(input_dir: str) -> list[Path] | list[str]:
    """The ``*.json`` files of ``input_dir`` (not searched recursively), sorted by name: ``Path`` s of a local
    folder, URLs of a folder on object storage (one listing, ``oars.data.storage.glob``).

    Raises:
        DataFileNotFoundError: the folder is missing or holds no json file.
    """
    if storage.is_url(input_dir):
        if not storage.isdir(input_dir):
            raise DataFileNotFoundError(f'labelme folder {input_dir} not found')
        files = [f for f in storage.glob(input_dir, '*.json') if '/' not in f[len(input_dir.rstrip('/')) + 1:]]
        if not files:
            raise DataFileNotFoundError(f'no labelme *.json files in {input_dir}')
        return files
    root = Path(input_dir)
    if not root.is_dir():
        raise DataFileNotFoundError(f'labelme folder {input_dir} not found')
    files = sorted(root.glob('*.json'))
    if not files:
        raise DataFileNotFoundError(f'no labelme *.json files in {input_dir}')
    return files


def read_labelme(path: Path | str, require_image_path: bool = False) -> LabelmeFile:
    """Load and check one labelme file's top level (the shapes are checked one by one by ``parse_shape``).

    Args:
        path: the json file (a local path, or a URL read through ``oars.data.storage``).
        require_image_path: also require ``imagePath`` (a converter that must find the image).

    Raises:
        DataError: unreadable or not a json object, a required key missing, a size that is not a positive
            whole number, ``shapes`` not a list; the message names ``path``.
    """
    path = path if isinstance(path, str) and storage.is_url(path) else Path(path)
    try:
        with storage.open_file(os.fspath(path), 'r', encoding='utf-8') as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise DataError(f'cannot read labelme file {path}: {err}') from None
    if not isinstance(data, dict):
        raise DataError(f'labelme file {path}: expected a json object, got {type(data).__name__}')
    required = ('imagePath',) * require_image_path + ('imageHeight', 'imageWidth', 'shapes')
    for key in required:
        if data.get(key) is None:
            raise DataError(f"labelme file {path}: no '{key}'; expected {', '.join(required)} "
                            '(labelme writes them in every file)')
    size = []
    for key in ('imageHeight', 'imageWidth'):
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0 or value != int(value):
            raise DataError(f"labelme file {path}: '{key}' is {value!r}; expected a positive whole number of pixels")
        size.append(int(value))
    if not isinstance(data['shapes'], list):
        raise DataError(f"labelme file {path}: 'shapes' must be a list, got {type(data['shapes']).__name__}")
    return LabelmeFile(path, size[0], size[1], str(data.get('imagePath') or ''), data['shapes'])


def shape_type(shape: Any) -> str | None:
    """A raw shape's ``shape_type`` (labelme leaves it out for polygons in old files); None if not an object."""
    return str(shape.get('shape_type') or 'polygon') if isinstance(shape, dict) else None


def parse_shape(shape: Any, at: str) -> LabelmeShape | None:
    """Check one raw shape; None for the kinds without area (``NO_AREA_SHAPES``).

    Args:
        shape: an entry of ``LabelmeFile.shapes``.
        at: where it is, for the messages (``LabelmeFile.shape_at(index)``).

    Raises:
        DataError: not an object, an unknown ``shape_type``, no label, fewer points than the kind needs (or not
            finite [x, y] pairs), a ``mask`` that is not a base64 PNG.
    """
    kind = shape_type(shape)
    if kind is None:
        raise DataError(f'{at} is {shape!r}; expected an object with label, points and shape_type')
    if kind in NO_AREA_SHAPES:
        return None
    if kind not in AREA_SHAPES:
        raise DataError(f'{at}: shape_type {kind!r} is not one of {list(AREA_SHAPES + NO_AREA_SHAPES)}')
    label = shape.get('label')
    if not isinstance(label, str) or not label:
        raise DataError(f'{at} ({kind}): label is {label!r}; expected a class name')
    at = f'{at} ({label!r}, {kind})'
    try:
        points = np.asarray(shape.get('points'), dtype=np.float64)
    except (TypeError, ValueError):
        points = np.zeros((0,))
    need = MIN_POINTS[kind]
    if points.ndim != 2 or points.shape[1] != 2 or len(points) < need or not np.isfinite(points).all():
        raise DataError(f"{at}: points {shape.get('points')!r}; expected at least {need} [x, y] pairs")
    mask = _decode_mask(shape.get('mask'), at) if kind == 'mask' else None
    return LabelmeShape(kind, label, points, mask)


def _decode_mask(data: Any, at: str) -> np.ndarray:
    """labelme >= 5.3's ``mask``: a base64 PNG -> [h, w] bool (non-zero pixels)."""
    try:
        with Image.open(io.BytesIO(base64.b64decode(data, validate=True))) as im:
            return np.array(im.convert('L')) > 0
    except (TypeError, ValueError, OSError, SyntaxError) as err:
        raise DataError(f"{at}: 'mask' is not a base64 PNG ({err})") from None


__all__ = ['AREA_SHAPES', 'MIN_POINTS', 'NO_AREA_SHAPES', 'LabelmeFile', 'LabelmeShape', 'list_labelme_files',
           'parse_shape', 'read_labelme', 'shape_type']
