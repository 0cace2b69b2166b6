"""labelme json files -> label-map PNGs (class ids) for the segmentation datasets: ``tools/convert.py labelme2seg``.

Each ``<stem>.json`` of the input folder becomes ``<stem>.png`` in the output folder: an 8-bit palette PNG whose
pixel values are class ids (0 background, 1..K the classes in the order of ``classes``, or the sorted names
found; 255 where a shape is labelled ``__ignore__``), the size of the image as labelme showed it
(``imageHeight`` x ``imageWidth``, EXIF orientation applied, as ``oars.data`` reads the images), so it pairs with
the image by stem in ``SegDataset``. Shapes are painted in file order, later over earlier, as labelme's own
``labelme_json_to_dataset`` does: polygons and rectangles with ``cv2.fillPoly``, circles (centre, a point on the
rim) with ``cv2.circle`` (coordinates at 1/16 pixel), ``mask`` shapes (labelme >= 5.3) from their PNG. Points,
lines and line strips have no area: they are left out and counted in one warning. ``class_names.txt`` lists
the names in id order, one per line.

Why everything is read and checked first: a bad file (no ``imageHeight``, a polygon of two points, a label not
in ``classes``) stops the run with one error naming the json file before any output is written, and no output
file is replaced unless ``overwrite``: a second run cannot silently mix two class orders in one folder.
"""

from __future__ import annotations

import base64
import io
import json
import os
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

from oars.errors import DataError, DataFileNotFoundError
from oars_deploy.atomic import atomic_write
from oars_deploy.draw import get_palette
from oars_deploy.draw.label_png import IGNORE_COLOUR, encode_palette_png

AREA_SHAPES: tuple[str, ...] = ('polygon', 'rectangle', 'circle', 'mask')
NO_AREA_SHAPES: tuple[str, ...] = ('point', 'points', 'line', 'linestrip')
IGNORE_LABEL = '__ignore__'
BACKGROUND_NAMES: tuple[str, ...] = ('background', '_background_', '__background__')
IGNORE_ID = 255
CLASS_NAMES_FILE = 'class_names.txt'
_SHIFT = 4  # fractional bits of the coordinates given to OpenCV (1/16 pixel)
_MIN_POINTS = {'polygon': 3, 'rectangle': 2, 'circle': 2, 'mask': 2}


@dataclass
class _Shape:
    kind: str
    label: str
    points: np.ndarray  # [N, 2] float64 x, y
    mask: np.ndarray | None = None  # [h, w] bool, for kind 'mask'


@dataclass
class _Doc:
    path: Path
    height: int
    width: int
    image_path: str
    shapes: list[_Shape]


def _read_doc(path: Path, skipped: Counter) -> _Doc:
    """One labelme file, checked; shapes of the kinds without area are counted in ``skipped``."""
    try:
        data = json.loads(path.read_text(encoding='utf-8'))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise DataError(f'cannot read labelme file {path}: {err}') from None
    if not isinstance(data, dict):
        raise DataError(f'labelme file {path}: expected a json object, got {type(data).__name__}')
    for key in ('imageHeight', 'imageWidth', 'shapes'):
        if data.get(key) is None:
            raise DataError(f"labelme file {path}: no '{key}'; expected imageHeight, imageWidth and shapes "
                            '(labelme writes them in every file)')
    size = []
    for key in ('imageHeight', 'imageWidth'):
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0 or value != int(value):
            raise DataError(f"labelme file {path}: '{key}' is {value!r}; expected a positive whole number of pixels")
        size.append(int(value))
    if not isinstance(data['shapes'], list):
        raise DataError(f"labelme file {path}: 'shapes' must be a list, got {type(data['shapes']).__name__}")
    shapes = []
    for index, shape in enumerate(data['shapes']):
        parsed = _read_shape(shape, f'labelme file {path}: shape {index}')
        if parsed is None:
            skipped[str(shape.get('shape_type'))] += 1
        else:
            shapes.append(parsed)
    return _Doc(path, size[0], size[1], str(data.get('imagePath') or ''), shapes)


def _read_shape(shape, at: str) -> _Shape | None:
    if not isinstance(shape, dict):
        raise DataError(f'{at} is {shape!r}; expected an object with label, points and shape_type')
    kind = shape.get('shape_type') or 'polygon'
    label = shape.get('label')
    if kind in NO_AREA_SHAPES:
        return None
    if kind not in AREA_SHAPES:
        raise DataError(f'{at}: shape_type {kind!r} is not one of {list(AREA_SHAPES + NO_AREA_SHAPES)}')
    if not isinstance(label, str) or not label:
        raise DataError(f'{at} ({kind}): label is {label!r}; expected a class name')
    at = f'{at} ({label!r}, {kind})'
    try:
        points = np.asarray(shape.get('points'), dtype=np.float64)
    except (TypeError, ValueError):
        points = np.zeros((0,))
    need = _MIN_POINTS[kind]
    if points.ndim != 2 or points.shape[1] != 2 or len(points) < need or not np.isfinite(points).all():
        raise DataError(f"{at}: points {shape.get('points')!r}; expected at least {need} [x, y] pairs")
    mask = _decode_mask(shape.get('mask'), at) if kind == 'mask' else None
    return _Shape(kind, label, points, mask)


def _decode_mask(data, at: str) -> np.ndarray:
    try:
        with Image.open(io.BytesIO(base64.b64decode(data, validate=True))) as im:
            return np.array(im.convert('L')) > 0
    except (TypeError, ValueError, OSError, SyntaxError) as err:
        raise DataError(f"{at}: 'mask' is not a base64 PNG ({err})") from None


def class_table(classes: Sequence[str] | None, found: Sequence[str], source: str) -> list[str]:
    """Names by id: ``[background, class 1, ..., class K]``.

    ``classes`` gives the order (default: the sorted labels ``found``); a first name of ``BACKGROUND_NAMES``
    is the background's name, and ``__ignore__`` is dropped (it paints 255), so labelme's ``labels.txt``
    (``__ignore__``, ``_background_``, ...) can be passed as it is.
    """
    if classes is None:
        names = sorted({n for n in found if n != IGNORE_LABEL and n not in BACKGROUND_NAMES})
    else:
        names = [str(c) for c in classes if str(c) != IGNORE_LABEL]
    background = names.pop(0) if names and names[0] in BACKGROUND_NAMES else 'background'
    misplaced = [n for n in names if n in BACKGROUND_NAMES]
    if misplaced:
        raise DataError(f'--classes: {misplaced} can only come first (the background is id 0)')
    table = [background, *names]
    dupes = sorted({c for c in table if table.count(c) > 1})
    if dupes:
        raise DataError(f'duplicate class names in --classes: {dupes}')
    if len(names) == 0:
        raise DataError(f'no shape labels found in {source}; nothing to convert (or pass --classes)')
    if len(table) > IGNORE_ID:
        raise DataError(f'{len(table)} classes with background; an 8-bit label map holds ids 0..254 '
                        f'({IGNORE_ID} is ignore)')
    return table


def rasterize(doc: _Doc, class_ids: dict[str, int]) -> np.ndarray:
    """``[imageHeight, imageWidth]`` uint8 class ids of one file's shapes, later shapes over earlier.

    labelme's coordinates put pixel i on [i, i + 1) (its centre at i + 0.5), so the points are moved by half
    a pixel into OpenCV's pixel-centre coordinates; OpenCV then fills the inside and the pixels the outline
    passes through, rounded to the nearest pixel at 1/16 pixel: the pixels labelme's own PIL drawing fills (a
    rectangle from (1.0, 2.0) to (4.0, 5.0) covers columns 1..4 and rows 2..5; from (0.6, 0.6) to (3.4, 3.4)
    columns and rows 0..3), up to a pixel where a slanted edge passes near a pixel's corner. A circle likewise
    covers its disk and the pixels its rim passes through (labelme's PIL ellipse is half a pixel lower right).
    """
    label = np.zeros((doc.height, doc.width), np.uint8)
    scale = 1 << _SHIFT
    for shape in doc.shapes:
        value = class_ids[shape.label]
        pts = shape.points - 0.5
        if shape.kind == 'rectangle':
            (x1, y1), (x2, y2) = pts.min(axis=0), pts.max(axis=0)
            pts = np.array([[x1, y1], [x2, y1], [x2, y2], [x1, y2]])
        if shape.kind in ('polygon', 'rectangle'):
            fixed = np.round(pts * scale).astype(np.int32)
            cv2.fillPoly(label, [fixed], color=int(value), lineType=cv2.LINE_8, shift=_SHIFT)
        elif shape.kind == 'circle':
            centre, rim = pts[0], pts[1]
            radius = float(np.hypot(*(rim - centre)))
            cv2.circle(label, tuple(int(v) for v in np.round(centre * scale)), int(round(radius * scale)),
                       color=int(value), thickness=-1, lineType=cv2.LINE_8, shift=_SHIFT)
        else:  # mask: a bool patch whose top-left pixel holds the first point, clipped to the image
            x0, y0 = (int(np.floor(v)) for v in shape.points[0])
            h, w = shape.mask.shape
            top, left = max(y0, 0), max(x0, 0)
            bottom, right = min(y0 + h, doc.height), min(x0 + w, doc.width)
            if bottom > top and right > left:
                patch = shape.mask[top - y0: bottom - y0, left - x0: right - x0]
                label[top:bottom, left:right][patch] = value
    return label


def _check_outputs(docs: list[_Doc], out_dir: Path, overwrite: bool) -> list[Path]:
    outs = [out_dir / f'{doc.path.stem}.png' for doc in docs]
    for doc, out in zip(docs, outs):
        if doc.image_path and (doc.path.parent / doc.image_path.replace('\\', '/')).resolve() == out.resolve():
            raise DataError(f'the label map of {doc.path} would be written over its image {out}; choose another '
                            '--out folder')
    if not overwrite:
        existing = [str(p) for p in (*outs, out_dir / CLASS_NAMES_FILE) if p.exists()]
        if existing:
            shown = ', '.join(existing[:5]) + (f' and {len(existing) - 5} more' if len(existing) > 5 else '')
            raise DataError(f'{len(existing)} output file(s) exist already: {shown}; nothing was written '
                            '(pass --overwrite to replace them, or choose an empty --out folder)')
    return outs


def labelme_to_seg(input_dir: str, out_dir: str, classes: Sequence[str] | None = None,
                   overwrite: bool = False) -> dict:
    """Convert every ``*.json`` of ``input_dir`` (sorted by name) into a label PNG in ``out_dir``.

    Args:
        input_dir: folder of labelme json files (not searched recursively).
        out_dir: output folder, created if needed; may exist and hold other files.
        classes: class names in id order 1..K (see ``class_table``); default the sorted labels found.
        overwrite: replace existing output files (else their existence is an error, before any writing).

    Returns:
        ``{'out_dir', 'files': [written png paths], 'classes': [names by id], 'shapes': {label: count},
        'skipped': {shape_type: count}}``.

    Raises:
        DataFileNotFoundError: ``input_dir`` is missing or has no json files.
        DataError: a bad file or shape (the json file and shape index named), a label not in ``classes``,
            or existing outputs without ``overwrite``. Nothing is written then.
    """
    root = Path(input_dir)
    if not root.is_dir():
        raise DataFileNotFoundError(f'labelme folder {input_dir} not found')
    files = sorted(root.glob('*.json'))
    if not files:
        raise DataFileNotFoundError(f'no labelme *.json files in {input_dir}')
    skipped: Counter[str] = Counter()
    docs = [_read_doc(path, skipped) for path in files]
    names = class_table(classes, [s.label for d in docs for s in d.shapes], f'the labelme files in {input_dir}')
    class_ids = {n: i for i, n in enumerate(names)}
    class_ids.update({n: 0 for n in BACKGROUND_NAMES})
    class_ids[IGNORE_LABEL] = IGNORE_ID
    counts: Counter[str] = Counter()
    for doc in docs:
        for index, shape in enumerate(doc.shapes):
            if shape.label not in class_ids:
                raise DataError(f'labelme file {doc.path}: shape {index} has label {shape.label!r}, which is not '
                                f'in --classes {names[1:]}; add it to --classes (or relabel the shape)')
            counts[shape.label] += 1
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise DataError(f'--out {out_dir} is a file; expected a folder for the label maps')
    outs = _check_outputs(docs, out, overwrite)
    table = np.zeros((256, 3), np.uint8)
    table[: len(names)] = get_palette(len(names))
    table[IGNORE_ID] = IGNORE_COLOUR
    for doc, path in zip(docs, outs):
        atomic_write(path, encode_palette_png(rasterize(doc, class_ids), table))
    atomic_write(out / CLASS_NAMES_FILE, ''.join(f'{n}\n' for n in names))
    if skipped:
        kinds = ', '.join(f'{k}: {n}' for k, n in sorted(skipped.items()))
        warnings.warn(f'labelme2seg: left out {sum(skipped.values())} shape(s) without area in {input_dir} '
                      f'({kinds}); only {list(AREA_SHAPES)} are painted', UserWarning, stacklevel=2)
    return {'out_dir': os.fspath(out), 'files': [os.fspath(p) for p in outs], 'classes': names,
            'shapes': dict(counts), 'skipped': dict(skipped)}


def summary(result: dict) -> str:
    """What ``labelme_to_seg`` wrote, in two lines (the second: the ``classes`` to put in a dataset config)."""
    names = result['classes']
    return (f"wrote {len(result['files'])} label maps and {CLASS_NAMES_FILE} to {result['out_dir']}: "
            f"{sum(result['shapes'].values())} shapes, {len(names)} classes with background\n"
            f'dataset config: classes: {json.dumps(names)}')


__all__ = ['AREA_SHAPES', 'CLASS_NAMES_FILE', 'class_table', 'labelme_to_seg', 'rasterize', 'summary']
