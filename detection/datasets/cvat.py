"""CVAT exports -> a COCO instances json that ``CocoDataset`` reads: ``tools/convert.py cvat2coco``.

Two export formats are read (chosen by the file's suffix, ``.xml`` or ``.json``):

- "CVAT for images 1.1" (``annotations.xml``): boxes and polygons become COCO annotations
  (:mod:`detection.datasets.cvat_xml`), the categories are the labels of ``<meta>`` in their order.
- "COCO 1.0" (``annotations/instances_<subset>.json``): already COCO; it is checked (ids, image sizes, every
  annotation's image and category, finite boxes and polygons, RLE sizes), its categories are renumbered 1..K
  (those not in ``classes`` dropped with their annotations) and the rest is kept, segmentations included.

Both: a box reaching outside its image is clipped to it (counted); one with no area inside it is an error; with
``img_dir`` every image must exist there with the size the export gives (EXIF orientation applied, as oars reads
images). Errors name the file and the XML line or the json entry; nothing is written on an error.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Sequence

import numpy as np

from detection.datasets.coco import load_coco, segmentation_mask
from detection.datasets.converters import polygon_area
from detection.datasets.cvat_xml import CvatShape, read_cvat_xml
from detection.datasets.yolo_files import image_size as header_size
from oars.data import storage
from oars.errors import DataError, DataFileNotFoundError


def _class_names(classes: Sequence[str] | None, labels: Sequence[str], source: str) -> list[str]:
    """``classes`` (checked against the export's ``labels``) or the labels themselves."""
    if classes is None:
        if not labels:
            raise DataError(f'cvat2coco: {source} names no labels; nothing to convert')
        return list(labels)
    names = [str(c) for c in classes]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise DataError(f'cvat2coco: duplicate class names in --classes: {dupes}')
    unknown = [n for n in names if n not in labels]
    if unknown:
        raise DataError(f'cvat2coco: --classes {unknown} are not labels of {source}; its labels are {list(labels)}')
    return names


def clip_box(box: Sequence[float], width: int, height: int, where: str) -> tuple[list[float], bool]:
    """A box clipped to its image, as COCO wants it.

    Why clip rather than refuse: CVAT lets a box reach past the image border by a fraction of a pixel, which says
    nothing wrong about the object; a box with nothing inside the image is a real error.

    Args:
        box: ``(x1, y1, x2, y2)`` in pixels.
        width, height: the image size.
        where: the start of the error message (file and line or entry).

    Returns:
        (``[x, y, w, h]`` floats inside the image, whether anything was cut off).

    Raises:
        DataError: no area of the box lies inside the ``width`` x ``height`` image.
    """
    x1, y1, x2, y2 = box
    cx1, cx2 = (min(max(v, 0), width) for v in (x1, x2))
    cy1, cy2 = (min(max(v, 0), height) for v in (y1, y2))
    if cx2 <= cx1 or cy2 <= cy1:
        raise DataError(f'{where}: box [x1, y1, x2, y2] = [{x1:g}, {y1:g}, {x2:g}, {y2:g}] has no area inside the '
                        f'{width}x{height} (WxH) image')
    return [float(cx1), float(cy1), float(cx2 - cx1), float(cy2 - cy1)], (cx1, cy1, cx2, cy2) != (x1, y1, x2, y2)


def _xml_annotation(shape: CvatShape, image: dict, where: str) -> tuple[dict, bool]:
    bbox, clipped = clip_box(shape.box, image['width'], image['height'], where)
    if shape.polygon is None:
        segmentation, area = [], bbox[2] * bbox[3]
    else:
        points = np.clip(shape.polygon, 0, [image['width'], image['height']])
        segmentation, area = [points.reshape(-1).tolist()], polygon_area(points)
        if area <= 0:
            raise DataError(f'{where}: polygon ({shape.label}) encloses no area inside the image')
    return {'bbox': bbox, 'area': float(area), 'iscrowd': 0, 'segmentation': segmentation,
            'attributes': shape.attributes}, clipped


def xml_to_coco(path: str, classes: Sequence[str] | None = None) -> tuple[dict, Counter]:
    """COCO dict of a "CVAT for images 1.1" XML file (image ids 1..N in file order, categories 1..K).

    Args:
        path: the ``annotations.xml``.
        classes: label names to keep, in category order (default: every label of ``<meta>``, in its order).

    Returns:
        (the COCO dict, counts of what was left out or changed: shape kinds, ``label not in --classes``,
        ``clipped to the image``).

    Raises:
        DataError: see :func:`detection.datasets.cvat_xml.read_cvat_xml`; a shape whose label is not in ``<meta>``,
            or with no area inside its image (the XML line named).
    """
    labels, cvat_images, counts = read_cvat_xml(path)
    found = sorted({s.label for im in cvat_images for s in im.shapes})
    names = _class_names(classes, labels or found, path)
    cat_of = {n: i for i, n in enumerate(names, start=1)}
    images, annotations = [], []
    for image_id, cvat_image in enumerate(cvat_images, start=1):
        image = {'id': image_id, 'file_name': cvat_image.name, 'width': cvat_image.width,
                 'height': cvat_image.height}
        images.append(image)
        for shape in cvat_image.shapes:
            where = f'cvat2coco: {path} line {shape.line}'
            if labels and shape.label not in labels:
                raise DataError(f'{where}: label {shape.label!r} is not one of the labels in <meta> {labels}')
            if shape.label not in cat_of:
                counts['label not in --classes'] += 1
                continue
            ann, clipped = _xml_annotation(shape, image, where)
            counts['clipped to the image'] += clipped
            ann.update(id=len(annotations) + 1, image_id=image_id, category_id=cat_of[shape.label])
            annotations.append(ann)
    coco = {'info': {'description': f'converted from CVAT for images 1.1 {path}'}, 'licenses': [], 'images': images,
            'annotations': annotations, 'categories': _categories(names)}
    return coco, +counts


def _categories(names: Sequence[str]) -> list[dict]:
    return [{'id': i, 'name': n, 'supercategory': ''} for i, n in enumerate(names, start=1)]


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _finite_numbers(values: list) -> bool:
    """Whether ``values`` is a flat list of finite numbers (one numpy pass; pycocotools crashes on NaN)."""
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return array.ndim == 1 and bool(np.isfinite(array).all())


def _checked_segmentation(segmentation: object, image: dict, where: str) -> object:
    """The segmentation as it is, after checking it is empty, polygons of >= 3 finite points, or a fitting RLE."""
    if isinstance(segmentation, list):
        for k, polygon in enumerate(segmentation):
            if not (isinstance(polygon, list) and len(polygon) >= 6 and len(polygon) % 2 == 0
                    and _finite_numbers(polygon)):
                raise DataError(f'{where}: segmentation polygon {k} is {polygon!r:.80}; expected [x1, y1, x2, y2, '
                                'x3, y3, ...] with at least 3 points of finite numbers')
        return segmentation
    _, problem = segmentation_mask(segmentation, image['width'], image['height'])
    if problem:
        raise DataError(f'{where}: {problem}')
    return segmentation


def coco_json_to_coco(path: str, classes: Sequence[str] | None = None) -> tuple[dict, Counter]:
    """A checked, renumbered copy of a CVAT "COCO 1.0" ``instances_*.json``.

    Args:
        path: the json file.
        classes: category names to keep, in the new id order 1..K (default: all, in the file's order).

    Returns:
        (the COCO dict: images and annotations keep their ids and other keys, categories renumbered 1..K,
        annotations of dropped categories left out, boxes clipped to their image, a missing or non-positive
        ``area`` recomputed; counts of ``category not in --classes`` and ``clipped to the image``).

    Raises:
        DataError: naming the file and ``images[i]`` / ``annotations[i] (id ...)`` / ``categories``: the checks of
            ``load_coco`` (structure, unique ids), repeated category names, an image without ``file_name`` or
            a positive ``width`` / ``height``, an annotation of an unknown image or category, a bbox that is not 4
            finite numbers or has no area inside its image, a bad polygon or RLE.
    """
    data = load_coco(path, owner='cvat2coco').dataset
    file_names = [str(c['name']) for c in data['categories']]
    repeated = sorted({n for n in file_names if file_names.count(n) > 1})
    if repeated:
        raise DataError(f'cvat2coco: {path}: categories {repeated} appear more than once; expected unique names')
    names = _class_names(classes, file_names, path)
    new_id = {c['id']: names.index(str(c['name'])) + 1 for c in data['categories'] if str(c['name']) in names}
    known_cats = {c['id'] for c in data['categories']}
    images = {}
    for i, image in enumerate(data['images']):
        where = f"cvat2coco: {path}: images[{i}] (id {image['id']})"
        if not isinstance(image.get('file_name'), str) or not image['file_name']:
            raise DataError(f"{where}: no 'file_name'; expected the image's path relative to the image folder")
        for key in ('width', 'height'):
            value = image.get(key)
            if not _finite(value) or value != int(value) or value <= 0:
                raise DataError(f'{where}: {key!r} is {value!r}; expected a positive whole number of pixels')
        images[image['id']] = image
    counts: Counter[str] = Counter()
    annotations = []
    for i, ann in enumerate(data['annotations']):
        where = f"cvat2coco: {path}: annotations[{i}] (id {ann['id']})"
        image = images.get(ann['image_id'])
        if image is None:
            raise DataError(f"{where}: image_id {ann['image_id']!r} is not the id of an image in the file")
        if ann['category_id'] not in known_cats:
            raise DataError(f"{where}: category_id {ann['category_id']!r} is not the id of a category; the file's "
                            f'ids are {sorted(known_cats, key=str)}')
        if ann['category_id'] not in new_id:
            counts['category not in --classes'] += 1
            continue
        bbox = ann.get('bbox')
        if not (isinstance(bbox, list) and len(bbox) == 4 and all(_finite(v) for v in bbox)):
            raise DataError(f'{where}: bbox is {bbox!r}; expected [x, y, width, height] of finite numbers')
        x, y, w, h = bbox
        box, clipped = clip_box((x, y, x + w, y + h), int(image['width']), int(image['height']), where)
        counts['clipped to the image'] += clipped
        segmentation = _checked_segmentation(ann.get('segmentation', []), image, where)
        area = ann.get('area')
        if not _finite(area) or area <= 0:
            polygons = segmentation if isinstance(segmentation, list) else []
            area = (sum(polygon_area(np.asarray(p, np.float64).reshape(-1, 2)) for p in polygons) if polygons
                    else box[2] * box[3])
        annotations.append({**ann, 'category_id': new_id[ann['category_id']], 'bbox': box, 'area': float(area),
                            'iscrowd': int(ann.get('iscrowd', 0) or 0), 'segmentation': segmentation})
    coco = {key: value for key, value in data.items() if key not in ('images', 'annotations', 'categories')}
    coco.update(images=list(images.values()), annotations=annotations, categories=_categories(names))
    return coco, +counts


def image_size(path: str) -> tuple[int, int] | None:
    """``(width, height)`` of an image file as oars reads it (EXIF orientation applied; CVAT's order), or None if
    PIL cannot open it. The reading is :func:`detection.datasets.yolo_files.image_size`'s."""
    size = header_size(path)
    return None if size is None else (size[1], size[0])


def check_images(coco: dict, img_dir: str, source: str, max_examples: int = 5) -> None:
    """Every image of ``coco`` must exist under ``img_dir`` with the export's width and height.

    Raises:
        DataFileNotFoundError: ``img_dir`` is missing, or images are (the first ``max_examples`` named).
        DataError: images PIL cannot read, or whose size differs from the export's (each named with both sizes).
    """
    if not storage.isdir(img_dir):
        raise DataFileNotFoundError(f'cvat2coco: --img-dir {img_dir} is not a folder')
    missing, wrong = [], []
    for image in coco['images']:
        path = storage.join(img_dir, image['file_name'])
        if not storage.listed_isfile(path):
            missing.append(path)
            continue
        size = image_size(path)
        if size != (image['width'], image['height']):
            found = 'unreadable' if size is None else f'{size[0]}x{size[1]}'
            wrong.append(f"{path} is {found} but {source} says "
                         f"{image['width']}x{image['height']}")

    def shown(items: list[str]) -> str:
        return '; '.join(items[:max_examples]) + (f'; and {len(items) - max_examples} more' if
                                                    len(items) > max_examples else '')

    if missing:
        raise DataFileNotFoundError(f"cvat2coco: {len(missing)} of {len(coco['images'])} image(s) of {source} not "
                                    f'found under --img-dir {img_dir}: {shown(missing)} (no COCO file was written)')
    if wrong:
        raise DataError(f"cvat2coco: {len(wrong)} of {len(coco['images'])} image(s) differ from {source} (WxH, "
                        f'EXIF orientation applied): {shown(wrong)}; re-export, or fix the images (no COCO file was '
                        'written)')


def cvat_to_coco(path: str, img_dir: str | None = None, classes: Sequence[str] | None = None) -> tuple[dict, Counter]:
    """A CVAT export (``.xml``: CVAT for images 1.1; ``.json``: COCO 1.0) as a checked COCO dict.

    Args:
        path: the export's annotation file (a local path or a URL, read through ``oars.data.storage``).
        img_dir: when given (a local folder or a URL), the folder the images' file names are relative to; each is
            checked to exist with the export's size.
        classes: names to keep, in category order (default: all labels of the export, in its order).

    Returns:
        (the COCO dict, counts of left-out or clipped shapes by reason).

    Raises:
        DataFileNotFoundError: ``path`` (or an image) does not exist.
        DataError: an unknown suffix, or any problem of the file (named with its line or entry).
    """
    if not storage.isfile(path):
        raise DataFileNotFoundError(f'cvat2coco: --input {path} not found')
    suffix = os.path.splitext(path)[1].lower()
    if suffix == '.xml':
        coco, counts = xml_to_coco(path, classes)
    elif suffix == '.json':
        coco, counts = coco_json_to_coco(path, classes)
    else:
        raise DataError(f'cvat2coco: --input {path}: expected the annotations.xml of a "CVAT for images 1.1" export '
                        'or the instances_*.json of a "COCO 1.0" export (unzipped)')
    if img_dir is not None:
        check_images(coco, img_dir, path)
    return coco, counts


def counts_line(counts: Counter) -> str:
    """The counts of :func:`cvat_to_coco` in one line (empty when nothing was left out or clipped)."""
    return ', '.join(f'{k}: {n}' for k, n in sorted(counts.items()))


__all__ = ['check_images', 'clip_box', 'coco_json_to_coco', 'counts_line', 'cvat_to_coco', 'image_size',
           'xml_to_coco']
