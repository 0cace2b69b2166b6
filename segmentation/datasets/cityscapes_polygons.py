"""Cityscapes polygon annotations -> train-id label maps: ``tools/convert.py cityscapes2seg``.

Each ``<name>_gt<Fine|Coarse>_polygons.json`` found under the input folder (any depth, e.g.
``gtFine/<split>/<city>/``) becomes ``<name>_gt<Fine|Coarse>_labelTrainIds.png`` at the same relative place in
the output folder, which is what ``CityscapesDataset`` pairs with ``leftImg8bit/<split>/<city>/<name>_leftImg8bit.png``.
The output is what cityscapesScripts' ``createTrainIdLabelImgs`` writes: an 8-bit greyscale PNG of
``imgHeight`` x ``imgWidth`` filled with 255, the objects drawn in file order (later over earlier) with PIL's
``ImageDraw.polygon`` in the train id of their label (:mod:`segmentation.datasets.cityscapes_labels`);
``deleted`` objects and labels with a negative id (license plates) are not drawn, ``<label>group`` is drawn
as ``<label>``.

Why everything is checked first: a bad file (broken JSON, no ``imgHeight``, a polygon of two points, a label
outside the table) stops the run with one error naming the json file and the object index before any label
map is written, and no existing label map is replaced unless ``overwrite``. The files are read twice (checked,
then drawn) so that a whole split never sits in memory.
"""

from __future__ import annotations

import io
import json
import math
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from oars.data import storage
from oars.errors import DataError, DataFileNotFoundError
from oars_deploy.atomic import atomic_write
from segmentation.datasets.cityscapes_labels import IGNORE_TRAIN_ID, lookup_label

POLYGON_SUFFIX = '_polygons.json'
LABEL_SUFFIX = '_labelTrainIds.png'
_PATTERN = f'*_gt*{POLYGON_SUFFIX}'  # gtFine and gtCoarse, as createTrainIdLabelImgs searches


@dataclass
class CityscapesPolygons:
    """One checked polygon file.

    Attributes:
        path: the json file (a local path or a URL).
        height, width: ``imgHeight``, ``imgWidth`` (positive).
        shapes: ``(train_id, points)`` of every object to draw, in file order; points [N, 2] float64, N >= 3.
        labels: how many objects of each label (as written) are drawn.
        skipped: how many objects were not drawn, by reason (``deleted``, ``no id (<label>)``).
    """

    path: str
    height: int
    width: int
    shapes: list[tuple[int, np.ndarray]]
    labels: Counter
    skipped: Counter


def list_polygon_files(input_dir: str) -> list[str]:
    """The polygon files to convert.

    Args:
        input_dir: the folder to search (all depths): a local folder or a URL (one listing of the bucket prefix).

    Returns:
        Every ``*_gt*_polygons.json`` under it, sorted by path.

    Raises:
        DataFileNotFoundError: ``input_dir`` is not a folder or holds no polygon file.
    """
    if not storage.isdir(input_dir):
        raise DataFileNotFoundError(f'--input {input_dir}: not a folder; expected a Cityscapes annotation folder '
                                    'such as data/cityscapes/gtFine')
    files = storage.glob(input_dir, _PATTERN)
    if not files:
        raise DataFileNotFoundError(f'--input {input_dir}: no {_PATTERN} files found (searched all sub-folders); '
                                    'expected gtFine/<split>/<city>/<name>_gtFine_polygons.json')
    return files


def _positive_int(doc: dict, key: str, where: str) -> int:
    if key not in doc:
        raise DataError(f'{where}: no {key!r}; expected the image size as imgHeight and imgWidth (pixels)')
    value = doc[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value) or value <= 0:
        raise DataError(f'{where}: {key!r} is {value!r}; expected a positive whole number of pixels')
    return int(value)


def _points(polygon: object, where: str) -> np.ndarray:
    """The ``[[x, y], ...]`` of one object as [N, 2] float64; at least 3 finite pairs. One numpy conversion in the
    common case; the point-by-point walk only to name the bad point."""
    if not isinstance(polygon, list):
        raise DataError(f"{where}: 'polygon' is {type(polygon).__name__}; expected a list of [x, y] pairs")
    try:
        points = np.asarray(polygon, dtype=np.float64)
    except (TypeError, ValueError):
        points = None
    if points is None or points.ndim != 2 or points.shape[1:] != (2,) or not np.isfinite(points).all():
        for k, point in enumerate(polygon):
            ok = (isinstance(point, list | tuple) and len(point) == 2
                  and all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in point))
            if not ok:
                raise DataError(f'{where}: point {k} is {point!r}; expected [x, y] with finite numbers')
    if len(polygon) < 3:
        raise DataError(f'{where}: polygon has {len(polygon)} point(s) {polygon!r}; expected at least 3 [x, y] pairs')
    return points


def read_polygons(path: str | os.PathLike) -> CityscapesPolygons:
    """Read and check one ``*_polygons.json``.

    Args:
        path: the json file (a local path or a URL).

    Returns:
        The checked file (:class:`CityscapesPolygons`).

    Raises:
        DataError: naming the file (and ``object <index> (<label>)``): unreadable or invalid JSON (with its line
            and column), no or bad ``imgHeight`` / ``imgWidth``, ``objects`` not a list, an object without
            ``label`` or ``polygon``, a polygon with fewer than 3 points or non-numeric points, a label that is
            not in the Cityscapes table (nor ``<label>group`` of one).
    """
    path = os.fspath(path)
    where = f'Cityscapes polygon file {path}'
    try:
        with storage.open_file(path, 'r', encoding='utf-8') as f:
            doc = json.load(f)
    except json.JSONDecodeError as err:
        raise DataError(f'{where}: invalid JSON at line {err.lineno} column {err.colno}: {err.msg}') from None
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f'{where}: cannot be read ({type(err).__name__}: {err})') from None
    if not isinstance(doc, dict):
        raise DataError(f'{where}: holds a JSON {type(doc).__name__}; expected an object with imgHeight, imgWidth '
                        'and objects')
    height, width = _positive_int(doc, 'imgHeight', where), _positive_int(doc, 'imgWidth', where)
    objects = doc.get('objects')
    if not isinstance(objects, list):
        raise DataError(f"{where}: 'objects' is {type(objects).__name__}; expected a list of "
                        "{'label': ..., 'polygon': [[x, y], ...]} objects")
    shapes, labels, skipped = [], Counter(), Counter()
    for index, obj in enumerate(objects):
        at = f'{where}: object {index}'
        if not isinstance(obj, dict) or not isinstance(obj.get('label'), str) or 'polygon' not in obj:
            raise DataError(f"{at} is {obj!r:.120}; expected an object with a 'label' string and a 'polygon'")
        name = obj['label']
        at = f'{at} ({name!r})'
        if obj.get('deleted'):  # left out unread, as createLabelImage does
            skipped['deleted'] += 1
            continue
        points = _points(obj['polygon'], at)
        label = lookup_label(name)
        if label is None:
            raise DataError(f'{at}: label {name!r} is not a Cityscapes label (nor <label>group of one); expected '
                            'one of the names in segmentation/datasets/cityscapes_labels.py')
        if label.id < 0:
            skipped[f'no id ({label.name})'] += 1
            continue
        shapes.append((label.train_id, points))
        labels[name] += 1
    return CityscapesPolygons(path, height, width, shapes, labels, skipped)


def rasterize(doc: CityscapesPolygons) -> np.ndarray:
    """The train-id label map of one file, drawn as ``createTrainIdLabelImgs`` draws it.

    Args:
        doc: a checked file (:func:`read_polygons`).

    Returns:
        ``[imgHeight, imgWidth]`` uint8: 255 (ignore) where no object lies, else the train id of the last object
        (file order) whose PIL polygon covers the pixel, outline included.
    """
    image = Image.new('L', (doc.width, doc.height), IGNORE_TRAIN_ID)
    draw = ImageDraw.Draw(image)
    for train_id, points in doc.shapes:
        draw.polygon(points.ravel().tolist(), fill=train_id)  # PIL takes ints and floats alike as doubles
    return np.array(image)


def encode_png(label_map: np.ndarray) -> bytes:
    """``[H, W]`` uint8 -> greyscale PNG bytes (PIL mode ``L``, as cityscapesScripts saves them)."""
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(label_map, dtype=np.uint8)).save(buf, format='PNG')
    return buf.getvalue()


def output_path(json_path: str | Path, input_dir: str | Path, out_dir: Path) -> Path:
    """``<out_dir>/<same relative folder>/<name>_gtFine_labelTrainIds.png`` of a polygon file (a local path or a
    URL under ``input_dir``; the output is local)."""
    json_path, input_dir = os.fspath(json_path), os.fspath(input_dir)
    rel = Path(json_path[len(input_dir.rstrip('/')) + 1:] if storage.is_url(json_path)
               else os.path.relpath(json_path, input_dir))
    return out_dir / rel.parent / (rel.name[: -len(POLYGON_SUFFIX)] + LABEL_SUFFIX)


def cityscapes_to_train_ids(input_dir: str, out_dir: str, overwrite: bool = False) -> dict:
    """Convert every polygon file under ``input_dir`` into a train-id label map under ``out_dir``.

    Args:
        input_dir: a folder holding ``*_gt*_polygons.json`` files at any depth (``gtFine``, ``gtFine/train``).
        out_dir: where the label maps go, at the same relative paths; may be ``input_dir`` itself (the maps then
            lie beside the json files, as cityscapesScripts puts them).
        overwrite: replace existing label maps (else their existence is an error, before any writing).

    Returns:
        ``{'out_dir', 'files': [written png paths], 'labels': {label: objects drawn}, 'skipped': {reason: count}}``.

    Raises:
        DataFileNotFoundError: no polygon file under ``input_dir``.
        DataError: a bad file (see :func:`read_polygons`), ``out_dir`` is a file, or label maps exist already and
            ``overwrite`` is false. Nothing is written then.
    """
    files = list_polygon_files(input_dir)
    labels: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    for path in files:  # first pass: check everything; nothing is kept but the counts
        doc = read_polygons(path)
        labels.update(doc.labels)
        skipped.update(doc.skipped)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise DataError(f'--out {out_dir} is a file; expected a folder for the label maps')
    outs = [output_path(p, input_dir, out) for p in files]
    if not overwrite:
        existing = [str(p) for p in outs if p.exists()]
        if existing:
            shown = ', '.join(existing[:5]) + (f' and {len(existing) - 5} more' if len(existing) > 5 else '')
            raise DataError(f'{len(existing)} label map(s) exist already: {shown}; nothing was written (pass '
                            '--overwrite to replace them, or choose another --out folder)')
    for path, target in zip(files, outs):
        atomic_write(target, encode_png(rasterize(read_polygons(path))))
    return {'out_dir': os.fspath(out), 'files': [os.fspath(p) for p in outs], 'labels': dict(labels),
            'skipped': dict(skipped)}


def summary(result: dict) -> str:
    """What :func:`cityscapes_to_train_ids` wrote, in one line (two when objects were left out)."""
    text = (f"wrote {len(result['files'])} train-id label maps ({LABEL_SUFFIX}) to {result['out_dir']}: "
            f"{sum(result['labels'].values())} objects drawn")
    if result['skipped']:
        text += '\nnot drawn (as cityscapesScripts): ' + ', '.join(
            f'{k}: {n}' for k, n in sorted(result['skipped'].items()))
    return text


__all__ = ['LABEL_SUFFIX', 'POLYGON_SUFFIX', 'CityscapesPolygons', 'cityscapes_to_train_ids', 'encode_png',
           'list_polygon_files', 'output_path', 'rasterize', 'read_polygons', 'summary']
