"""Converters to COCO instances json: PASCAL VOC (ImageSets list + XML) and labelme (one json per image).

Why COCO as the common target: ``CocoDataset`` and the COCO metric then serve every source, and pycocotools
can check the result. Category ids are 1..K in the order of ``classes`` (default: the sorted names found).
The CLI is ``tools/convert.py``; these functions return the COCO dict and ``write_coco_json`` writes it
atomically.
"""

from __future__ import annotations

import json
import os
import posixpath
import warnings
from collections import Counter
from collections.abc import Sequence

import numpy as np

from detection.datasets.annotation_checks import BadAnnotationWarning
from detection.datasets.voc import VOCDataset, object_names, read_split
from oars.data import storage
from oars.data.labelme import LabelmeFile, list_labelme_files, parse_shape, read_labelme, shape_type
from oars.errors import DataError, DataFileNotFoundError
from oars_deploy.atomic import atomic_write

LABELME_SHAPES: tuple[str, ...] = ('polygon', 'rectangle')


def _checked_classes(classes: Sequence[str] | None, found: Sequence[str], source: str) -> list[str]:
    names = sorted(set(found)) if classes is None else [str(c) for c in classes]
    if not names:
        raise DataError(f'no object labels found in {source}; nothing to convert (or pass --classes)')
    dupes = sorted({c for c in names if names.count(c) > 1})
    if dupes:
        raise DataError(f'duplicate class names in --classes: {dupes}')
    return names


def _categories(names: Sequence[str]) -> list[dict]:
    return [{'id': i, 'name': n, 'supercategory': 'none'} for i, n in enumerate(names, start=1)]


def voc_to_coco(voc_root: str, split: str, classes: Sequence[str] | None = None, img_suffix: str = '.jpg',
                on_bad_annotation: str = 'fail') -> dict:
    """COCO dict of the images listed in ``voc_root/split`` (read by ``VOCDataset``, same checks and policy).

    ``file_name`` is relative to ``voc_root/JPEGImages``; boxes keep ``VOCDataset``'s 0-based corner
    convention (``x = xmin - 1``, ``w = xmax - xmin + 1``); difficult objects become ``iscrowd=1`` (ignored by
    ``CocoDataset`` and by COCO evaluation); ``segmentation`` is empty (VOC has boxes only).
    """
    if not storage.isdir(voc_root):
        raise DataFileNotFoundError(f'VOC root {voc_root} not found (expected a folder with JPEGImages/, '
                                    'Annotations/ and ImageSets/)')
    if classes is None:
        split_file = storage.join(voc_root, split)
        xmls = [storage.join(voc_root, 'Annotations', i + '.xml') for i in read_split(split_file)]
        classes = _checked_classes(None, object_names(xmls), f'the XML files listed in {split_file}')
    else:
        classes = _checked_classes(classes, (), voc_root)
    ds = VOCDataset(data_root=voc_root, ann_file=split, img_suffix=img_suffix, classes=classes,
                    filter_empty_gt=False, test_mode=True, serialize_data=False, on_bad_annotation=on_bad_annotation)
    images, annotations = [], []
    for image_id, info in enumerate(ds.data_list, start=1):
        images.append({'id': image_id, 'file_name': os.path.basename(info['img_path']),
                       'height': info['height'], 'width': info['width']})
        for inst in info['instances']:
            x1, y1, x2, y2 = inst['bbox']
            annotations.append({'id': len(annotations) + 1, 'image_id': image_id,
                                'category_id': inst['bbox_label'] + 1, 'bbox': [x1, y1, x2 - x1, y2 - y1],
                                'area': (x2 - x1) * (y2 - y1), 'iscrowd': inst['ignore_flag'], 'segmentation': []})
    return {'info': {'description': f'converted from VOC {storage.join(voc_root, split)}'}, 'licenses': [],
            'images': images, 'annotations': annotations, 'categories': _categories(classes)}


def polygon_area(points: np.ndarray) -> float:
    """Area of a simple polygon ``[[x, y], ...]`` by the shoelace formula."""
    x, y = points[:, 0], points[:, 1]
    return float(0.5 * abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))))


def _shape_annotation(pts: np.ndarray, kind: str) -> dict | None:
    """bbox/area/segmentation of one polygon or rectangle; None when it has no area."""
    (x1, y1), (x2, y2) = pts.min(axis=0), pts.max(axis=0)
    if kind == 'rectangle':
        polygon = [x1, y1, x2, y1, x2, y2, x1, y2]
        area = (x2 - x1) * (y2 - y1)
    else:
        polygon = pts.reshape(-1).tolist()
        area = polygon_area(pts)
    if x2 <= x1 or y2 <= y1 or area <= 0:
        return None
    return {'bbox': [float(x1), float(y1), float(x2 - x1), float(y2 - y1)], 'area': float(area),
            'segmentation': [[float(v) for v in polygon]], 'iscrowd': 0}


def labelme_image_path(doc: LabelmeFile) -> str:
    """The absolute, normalised path of the image a labelme file names (``imagePath`` is relative to the json;
    Windows separators are accepted); the URL beside it for a json on object storage."""
    return doc.image_location()


def check_labelme_images(docs: Sequence[LabelmeFile], input_dir: str, max_examples: int = 5) -> list[str]:
    """The image path of each labelme file (``labelme_image_path``), every one checked to exist.

    Why: a COCO file listing an image that is not there converts with exit status 0 and fails only when a
    training run reaches it (or loses the image under ``on_bad_annotation: skip``).

    Raises:
        DataFileNotFoundError: naming each labelme file whose image is missing (the first ``max_examples``), its
            ``imagePath`` and the path looked for, and how many of the images are missing.
    """
    paths = [labelme_image_path(doc) for doc in docs]
    missing = [f"{doc.path}: imagePath {doc.image_path!r} -> {path}"
               for doc, path in zip(docs, paths) if not storage.listed_isfile(path)]
    if missing:
        shown = '; '.join(missing[:max_examples]) + ('; ...' if len(missing) > max_examples else '')
        raise DataFileNotFoundError(
            f'labelme2coco: {len(missing)} of {len(docs)} image(s) named by the labelme files in {input_dir} not '
            f'found: {shown}; expected each image at its imagePath, relative to its json file: copy the images '
            'there or fix imagePath (no COCO file was written)')
    return paths


def _relative(path: str, root: str) -> str:
    """``os.path.relpath``; for URLs, the ``/`` path of ``path`` relative to ``root`` (their parts after ``://``)."""
    if not (storage.is_url(path) or storage.is_url(root)):
        return os.path.relpath(path, root)
    return posixpath.relpath(path.split('://', 1)[-1], root.split('://', 1)[-1])


def labelme_to_coco(input_dir: str, classes: Sequence[str] | None = None, image_root: str | None = None) -> dict:
    """COCO dict of every ``*.json`` labelme file in ``input_dir`` (sorted by name; image ids 1..N).

    Polygons keep their points as the segmentation, with the bbox from their extent and the area by the
    shoelace formula; rectangles become a bbox plus a 4-point polygon. ``file_name`` is the image path
    (``imagePath``, relative to its json) made relative to ``image_root`` (default ``input_dir``). Shapes of
    other types, labels not in ``classes``, and shapes without area are left out and counted in one warning.
    Every image must exist (``check_labelme_images``: ``DataFileNotFoundError`` naming the json and the image).
    """
    docs = [read_labelme(path, require_image_path=True) for path in list_labelme_files(input_dir)]
    img_paths = check_labelme_images(docs, input_dir)
    found = [s.get('label') for d in docs for s in d.shapes if shape_type(s) in LABELME_SHAPES]
    names = _checked_classes(classes, [str(n) for n in found if n], f'the labelme files in {input_dir}')
    cat_of = {n: i for i, n in enumerate(names, start=1)}
    img_root = storage.absolute(image_root or input_dir)

    skipped: Counter[str] = Counter()
    examples: list[str] = []

    def skip(kind: str, text: str) -> None:
        skipped[kind] += 1
        if len(examples) < 5:
            examples.append(text)

    images, annotations = [], []
    for image_id, (doc, img_path) in enumerate(zip(docs, img_paths), start=1):
        images.append({'id': image_id, 'file_name': _relative(img_path, img_root),
                       'height': doc.height, 'width': doc.width})
        for index, shape in enumerate(doc.shapes):
            kind = shape_type(shape)
            if kind is None:
                skip('malformed shape', f'{doc.path}: shape {index} is {shape!r}; expected an object')
                continue
            label = str(shape.get('label'))
            at = f'{doc.path}: shape {index} ({label}, {kind})'
            if kind not in LABELME_SHAPES:
                skip(f'shape type {kind!r}', f'{at}: only {list(LABELME_SHAPES)} are converted')
                continue
            if label not in cat_of:
                skip('label not in classes', f'{at}: label {label!r} not in {names}')
                continue
            try:  # too few points or not [x, y] pairs: left out like a shape without area
                parsed = parse_shape(shape, doc.shape_at(index))
            except DataError as err:
                skip('degenerate shape', str(err))
                continue
            ann = None if parsed is None else _shape_annotation(parsed.points, kind)
            if ann is None:
                skip('degenerate shape', f"{at}: points {shape.get('points')!r} enclose no area")
                continue
            ann.update(id=len(annotations) + 1, image_id=image_id, category_id=cat_of[label])
            annotations.append(ann)
    if skipped:
        counts = ', '.join(f'{k}: {n}' for k, n in sorted(skipped.items()))
        warnings.warn(f'labelme2coco: left out {sum(skipped.values())} shape(s) in {input_dir} - {counts}; '
                      'first examples:\n' + '\n'.join(f'  - {e}' for e in examples), BadAnnotationWarning,
                      stacklevel=2)
    return {'info': {'description': f'converted from labelme {input_dir}'}, 'licenses': [], 'images': images,
            'annotations': annotations, 'categories': _categories(names)}


def write_coco_json(coco: dict, out: str) -> None:
    """Write ``coco`` to ``out`` atomically (``oars_deploy.atomic.atomic_write``)."""
    atomic_write(out, json.dumps(coco))


def summary(coco: dict, out: str) -> str:
    """One line describing a written COCO file."""
    names = [c['name'] for c in coco['categories']]
    return (f"wrote {out}: {len(coco['images'])} images, {len(coco['annotations'])} annotations, "
            f'{len(names)} categories {names}')


__all__ = ['check_labelme_images', 'labelme_image_path', 'labelme_to_coco', 'polygon_area', 'summary', 'voc_to_coco',
           'write_coco_json']
