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

import json
import os
import warnings
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np

from oars.data.labelme import (
    AREA_SHAPES,
    LabelmeFile,
    LabelmeShape,
    list_labelme_files,
    parse_shape,
    read_labelme,
    shape_type,
)
from oars.errors import DataError
from oars_deploy.atomic import atomic_write
from oars_deploy.draw import get_palette
from oars_deploy.draw.label_png import IGNORE_COLOUR, encode_palette_png

IGNORE_LABEL = '__ignore__'
BACKGROUND_NAMES: tuple[str, ...] = ('background', '_background_', '__background__')
IGNORE_ID = 255
CLASS_NAMES_FILE = 'class_names.txt'
_SHIFT = 4  # fractional bits of the coordinates given to OpenCV (1/16 pixel)


def _read_doc(path: Path | str, skipped: Counter) -> tuple[LabelmeFile, list[LabelmeShape]]:
    """One labelme file and its shapes, every shape checked (a bad one stops the run); shapes of the kinds
    without area are counted in ``skipped``."""
    doc = read_labelme(path)
    shapes = []
    for index, shape in enumerate(doc.shapes):
        parsed = parse_shape(shape, doc.shape_at(index))
        if parsed is None:
            skipped[str(shape_type(shape))] += 1
        else:
            shapes.append(parsed)
    return doc, shapes


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


def rasterize(shapes: Sequence[LabelmeShape], height: int, width: int, class_ids: dict[str, int]) -> np.ndarray:
    """``[height, width]`` uint8 class ids of one file's shapes (``imageHeight`` x ``imageWidth``), later shapes
    over earlier.

    labelme's coordinates put pixel i on [i, i + 1) (its centre at i + 0.5), so the points are moved by half
    a pixel into OpenCV's pixel-centre coordinates; OpenCV then fills the inside and the pixels the outline
    passes through, rounded to the nearest pixel at 1/16 pixel: the pixels labelme's own PIL drawing fills (a
    rectangle from (1.0, 2.0) to (4.0, 5.0) covers columns 1..4 and rows 2..5; from (0.6, 0.6) to (3.4, 3.4)
    columns and rows 0..3), up to a pixel where a slanted edge passes near a pixel's corner. A circle likewise
    covers its disk and the pixels its rim passes through (labelme's PIL ellipse is half a pixel lower right).
    """
    label = np.zeros((height, width), np.uint8)
    scale = 1 << _SHIFT
    for shape in shapes:
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
            bottom, right = min(y0 + h, height), min(x0 + w, width)
            if bottom > top and right > left:
                patch = shape.mask[top - y0: bottom - y0, left - x0: right - x0]
                label[top:bottom, left:right][patch] = value
    return label


def _check_outputs(docs: list[LabelmeFile], out_dir: Path, overwrite: bool) -> list[Path]:
    outs = [out_dir / f'{Path(doc.path).stem}.png' for doc in docs]  # a URL's name too: the outputs are local
    for doc, out in zip(docs, outs):
        if doc.image_path and Path(doc.image_location()).resolve() == out.resolve():  # a URL never is
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
        input_dir: folder of labelme json files (not searched recursively): a local folder or a URL; the label
            maps are written to the local ``out_dir``.
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
    files = list_labelme_files(input_dir)
    skipped: Counter[str] = Counter()
    read = [_read_doc(path, skipped) for path in files]
    docs = [doc for doc, _ in read]
    names = class_table(classes, [s.label for _, shapes in read for s in shapes], f'the labelme files in {input_dir}')
    class_ids = {n: i for i, n in enumerate(names)}
    class_ids.update({n: 0 for n in BACKGROUND_NAMES})
    class_ids[IGNORE_LABEL] = IGNORE_ID
    counts: Counter[str] = Counter()
    for doc, shapes in read:
        for index, shape in enumerate(shapes):
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
    for (doc, shapes), path in zip(read, outs):
        atomic_write(path, encode_palette_png(rasterize(shapes, doc.height, doc.width, class_ids), table))
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
