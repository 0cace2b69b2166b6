"""Reading the files of an ultralytics-style YOLO txt dataset: the data YAML, a split's images, label paths and
label lines. ``YOLOTxtDataset`` and the converters (``yolo2coco``/``coco2yolo``) share these functions, so that
"which label belongs to which image" and "what a good line is" are decided once.

Layout (ultralytics'): ``<path>/images/<split>/*.jpg`` and ``<path>/labels/<split>/*.txt``, one object per line,
``class cx cy w h`` with the box centre and size divided by the image's width and height (0..1). The label file of
an image is its path with the last ``/images/`` replaced by ``/labels/`` and the suffix by ``.txt``
(ultralytics' ``img2label_paths``); an image without a label file is an image without objects.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

import yaml
from PIL import Image

from oars.data import storage
from oars.errors import DataError, DataFileNotFoundError

# suffixes OpenCV reads (ultralytics' IMG_FORMATS less the ones OpenCV cannot decode)
IMAGE_SUFFIXES: tuple[str, ...] = ('.bmp', '.jpeg', '.jpg', '.png', '.tif', '.tiff', '.webp')
# files that annotation tools put beside the labels and that are not the labels of an image (LabelImg)
NOT_LABEL_FILES: frozenset[str] = frozenset({'classes.txt'})
LINE_FIELDS = 5  # class cx cy w h
EPS = 1e-6  # tolerance on 0..1 for values written with rounding (1.0000001)

# problem kinds (keys of the counts in the on_bad_annotation: skip warning)
MALFORMED_LINE = 'malformed label line'
CLASS_OUT_OF_RANGE = 'class id out of range'
OUTSIDE_UNIT = 'coordinate outside 0..1'
ORPHAN_LABEL = 'label file without an image'


@dataclass(frozen=True)
class DataYaml:
    """A parsed data YAML.

    Attributes:
        yaml_path: the YAML file (absolute).
        root: the dataset folder (``path``; relative to the YAML's folder; the YAML's folder when absent).
        names: class names in class-id order.
        splits: the YAML's ``train``/``val``/``test`` entries as written (a folder, a .txt list, or a list of those).
    """

    yaml_path: str
    root: str
    names: tuple[str, ...]
    splits: dict

    def sources(self, split: str) -> list[str]:
        """The absolute folders / list files of ``split``; ``DataError`` when the YAML has no such key."""
        value = self.splits.get(split)
        if not value:
            given = sorted(k for k, v in self.splits.items() if v)
            raise DataError(f'{self.yaml_path}: no {split!r} entry; expected `{split}: images/{split}` (a folder, a '
                            f'.txt list of images, or a list of those, relative to `path`); the file has {given}')
        items = value if isinstance(value, list | tuple) else [value]
        if not all(isinstance(v, str) for v in items):
            raise DataError(f'{self.yaml_path}: {split}: {value!r}; expected a path or a list of paths')
        return [v if os.path.isabs(v) or storage.is_url(v) else storage.normpath(storage.join(self.root, v))
                for v in items]


def _names(raw: object, yaml_path: str) -> tuple[str, ...]:
    """Class names from ``names`` (a list, or ``{id: name}`` with ids 0..K-1)."""
    if isinstance(raw, dict):
        try:
            by_id = {int(k): str(v) for k, v in raw.items()}
        except (TypeError, ValueError):
            by_id = {}
        if not by_id or sorted(by_id) != list(range(len(by_id))):
            raise DataError(f'{yaml_path}: names: {raw!r}; expected {{id: name}} with the ids 0..K-1 (or a list of '
                            'names in class-id order)')
        names = tuple(by_id[i] for i in range(len(by_id)))
    elif isinstance(raw, list | tuple) and raw:
        names = tuple(str(n) for n in raw)
    else:
        raise DataError(f'{yaml_path}: names: {raw!r}; expected a non-empty list of class names or {{id: name}}')
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise DataError(f'{yaml_path}: names: duplicate class names {dupes}; expected one name per class id')
    return names


def read_data_yaml(yaml_path: str) -> DataYaml:
    """Parse an ultralytics data YAML (``path``, ``train``, ``val``, ``test``, ``names``).

    Args:
        yaml_path: the YAML file (a local path or a URL: then every path it gives is a URL under the same root).

    Returns:
        :class:`DataYaml`; ``root`` is ``path`` resolved against the YAML's folder (one rule; ultralytics resolves a
        relative ``path`` against its own settings folder instead), or the YAML's folder without ``path``.

    Raises:
        DataFileNotFoundError: no such file, or ``path`` is not a folder. DataError: not a YAML mapping, bad names.
    """
    yaml_path = storage.absolute(yaml_path)
    if not storage.isfile(yaml_path):
        raise DataFileNotFoundError(f'data YAML {yaml_path} not found; expected an ultralytics data YAML with path, '
                                    'train, val and names')
    try:
        with storage.open_file(yaml_path, 'r', encoding='utf-8') as f:
            data = yaml.safe_load(f)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise DataError(f'cannot read data YAML {yaml_path}: {err}') from None
    if not isinstance(data, dict):
        raise DataError(f'data YAML {yaml_path} holds a {type(data).__name__}; expected a mapping with path, train, '
                        'val and names')
    if 'names' not in data:
        raise DataError(f'{yaml_path}: no `names`; expected the class names (a list, or {{id: name}})')
    folder = os.path.dirname(yaml_path)
    path = data.get('path') or ''
    if not isinstance(path, str):
        raise DataError(f'{yaml_path}: path: {path!r}; expected the dataset folder')
    root = storage.normpath(storage.join(folder, path)) if path else folder
    if not storage.isdir(root):
        raise DataFileNotFoundError(f'{yaml_path}: path {path!r} -> {root} is not a folder; expected the dataset '
                                    "folder (a relative path is relative to the YAML's folder)")
    splits = {k: data.get(k) for k in ('train', 'val', 'test')}
    return DataYaml(yaml_path, root, _names(data['names'], yaml_path), splits)


def _list_images(folder: str) -> list[str]:
    return [storage.join(folder, rel) for rel in storage.list_dir(folder)
            if os.path.splitext(rel)[1].lower() in IMAGE_SUFFIXES]


def _read_list(list_file: str) -> list[str]:
    """Image paths of a .txt list: absolute, or relative to the list's folder (``./x`` as ultralytics)."""
    folder = os.path.dirname(list_file)
    with storage.open_file(list_file, 'r', encoding='utf-8') as f:
        lines = [line.strip() for line in f if line.strip()]
    return [p if os.path.isabs(p) or storage.is_url(p) else storage.normpath(storage.join(folder, p)) for p in lines]


def split_images(data: DataYaml, split: str) -> list[str]:
    """Sorted, distinct absolute image paths of ``split`` (folders searched recursively for image suffixes).

    Raises:
        DataFileNotFoundError: a source that does not exist, or a listed image that does not. DataError: no image.
    """
    images: list[str] = []
    for source in data.sources(split):
        if storage.isdir(source):
            images += _list_images(source)
        elif source.endswith('.txt') and storage.isfile(source):
            listed = _read_list(source)
            missing = [p for p in listed if not storage.listed_isfile(p)]
            if missing:
                raise DataFileNotFoundError(f'{source} (listed as {split} in {data.yaml_path}): {len(missing)} '
                                            f'image(s) not found, e.g. {missing[:3]}')
            images += listed
        else:
            raise DataFileNotFoundError(f'{data.yaml_path}: {split}: {source} not found; expected a folder of images '
                                        'or a .txt list of images (relative to `path`)')
    images = sorted(set(images))
    if not images:
        raise DataError(f'{data.yaml_path}: {split}: no images ({", ".join(IMAGE_SUFFIXES)}) in '
                        f'{data.sources(split)}')
    return images


def label_path(img_path: str) -> str:
    """The label file of an image (ultralytics' ``img2label_paths``): the last ``/images/`` of the path becomes
    ``/labels/`` and the suffix ``.txt``; beside the image when the path has no ``images`` folder."""
    sep = '/' if storage.is_url(img_path) else os.sep
    sa, sb = f'{sep}images{sep}', f'{sep}labels{sep}'
    return os.path.splitext(sb.join(img_path.rsplit(sa, 1)))[0] + '.txt'


def orphan_labels(data: DataYaml, split: str, images: Sequence[str]) -> list[str]:
    """Label files in the labels folder of each folder source of ``split`` that belong to none of ``images``
    (a label without an image: a renamed or deleted image, whose objects would be lost without a word).
    List-file sources are not searched (a list picks some images of a folder on purpose)."""
    expected = {storage.normpath(label_path(p)) for p in images}
    orphans = []
    for source in data.sources(split):
        if not storage.isdir(source):
            continue
        labels = storage.normpath(label_path(storage.join(source, 'x.jpg')))[:-len('x.txt')]
        if storage.normpath(labels) == storage.normpath(source) or not storage.isdir(labels):
            continue
        found = (storage.normpath(storage.join(labels, rel)) for rel in storage.list_dir(labels))
        orphans += [p for p in found if p.endswith('.txt') and os.path.basename(p) not in NOT_LABEL_FILES
                    and p not in expected]
    return sorted(orphans)


@dataclass(frozen=True)
class LabelLine:
    """One parsed object: ``cls`` (int), ``cx, cy, w, h`` normalised (0..1, floats), ``line`` 1-based."""

    cls: int
    cx: float
    cy: float
    w: float
    h: float
    line: int


def parse_line(text: str, num_classes: int, line: int) -> tuple[LabelLine | None, tuple[str, str] | None]:
    """``(object, None)`` for a good line, ``(None, (kind, why))`` for a bad one; a blank line is ``(None, None)``.

    Args:
        text: the line without its newline.
        num_classes: K; class ids are 0..K-1 (integers; ``3.0`` is accepted as 3).
        line: its 1-based number in the file.
    """
    fields = text.split()
    if not fields:
        return None, None
    if len(fields) != LINE_FIELDS:
        extra = (' (a polygon segment line; only box lines are read: convert segments to boxes)'
                 if len(fields) >= 7 and len(fields) % 2 == 1 else '')
        return None, (MALFORMED_LINE, f'{len(fields)} fields {text.strip()!r}{extra}; expected 5: class cx cy w h')
    try:
        values = [float(v) for v in fields]
    except ValueError:
        return None, (MALFORMED_LINE, f'{text.strip()!r} is not 5 numbers; expected: class cx cy w h')
    if not all(math.isfinite(v) for v in values):
        return None, (MALFORMED_LINE, f'{text.strip()!r} holds a value that is not finite; expected 5 numbers')
    cls = values[0]
    if cls != int(cls) or not 0 <= cls < num_classes:
        return None, (CLASS_OUT_OF_RANGE, f'class id {fields[0]}; expected an integer 0..{num_classes - 1} (the '
                                          f'{num_classes} names of the data YAML)')
    outside = [f'{n} = {v}' for n, v in zip(('cx', 'cy', 'w', 'h'), fields[1:]) if not -EPS <= float(v) <= 1 + EPS]
    if outside:
        return None, (OUTSIDE_UNIT, f'{", ".join(outside)}; expected values divided by the image size, in 0..1 '
                                    '(pixel values?)')
    cx, cy, w, h = (min(max(v, 0.0), 1.0) for v in values[1:])
    return LabelLine(int(cls), cx, cy, w, h, line), None


def read_label_lines(path: str) -> list[str]:
    """The lines of a label file (a local path or a URL); ``DataError`` naming it when it cannot be read as text."""
    try:
        with storage.open_file(path, 'r', encoding='utf-8') as f:
            return f.read().splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f'cannot read label file {path} ({type(err).__name__}: {err}); expected text lines '
                        '`class cx cy w h`') from None


def image_size(img_path: str) -> tuple[int, int] | None:
    """``(height, width)`` as the pipeline reads the image (EXIF orientations 5-8 swap the sides, as OpenCV's
    imread does), from the file's header (PIL, no decoding: sizes of a whole split are read at load time);
    None when PIL cannot open it. A URL is opened through ``oars.data.storage`` (PIL reads only the header's
    blocks); a URL that cannot be read is None too, and the caller's message names it."""
    try:
        with storage.open_file(img_path, 'rb') as f, Image.open(f) as im:
            width, height = im.size
            orientation = im.getexif().get(0x0112, 1)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError):
        return None
    if orientation in (5, 6, 7, 8):
        width, height = height, width
    return int(height), int(width)
