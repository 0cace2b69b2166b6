"""COCO-format detection data set (instances json): read once, checked and indexed in arrays (``coco_build``)."""

from __future__ import annotations

import contextlib
import gc
import io
import json
from collections.abc import Sequence
from itertools import repeat

import numpy as np
from mmengine.dataset.base_dataset import force_full_init
from pycocotools.coco import COCO

from detection.datasets import annotation_checks as checks
from detection.datasets.base import DetectionDataset, pipeline_loads_masks
from detection.datasets.coco_build import (
    CROWD,
    DEGENERATE_POLYGON_KINDS,
    OTHER_CATEGORY,
    build_index,
    segmentation_mask,
)
from detection.datasets.coco_checks import check_ids
from detection.registry import DATASETS
from oars.data import storage
from oars.errors import DataError, DataFileNotFoundError

COCO_CLASSES: tuple[str, ...] = (
    'person', 'bicycle', 'car', 'motorcycle', 'airplane', 'bus', 'train', 'truck', 'boat', 'traffic light',
    'fire hydrant', 'stop sign', 'parking meter', 'bench', 'bird', 'cat', 'dog', 'horse', 'sheep', 'cow',
    'elephant', 'bear', 'zebra', 'giraffe', 'backpack', 'umbrella', 'handbag', 'tie', 'suitcase', 'frisbee',
    'skis', 'snowboard', 'sports ball', 'kite', 'baseball bat', 'baseball glove', 'skateboard', 'surfboard',
    'tennis racket', 'bottle', 'wine glass', 'cup', 'fork', 'knife', 'spoon', 'bowl', 'banana', 'apple',
    'sandwich', 'orange', 'broccoli', 'carrot', 'hot dog', 'pizza', 'donut', 'cake', 'chair', 'couch',
    'potted plant', 'bed', 'dining table', 'toilet', 'tv', 'laptop', 'mouse', 'remote', 'keyboard', 'cell phone',
    'microwave', 'oven', 'toaster', 'sink', 'refrigerator', 'book', 'clock', 'vase', 'scissors', 'teddy bear',
    'hair drier', 'toothbrush',
)


COCO_KEYS = ('images', 'annotations', 'categories')
_ANNOTATION_KEYS = ('id', 'image_id', 'category_id')  # what pycocotools' index needs


def _coco_json(ann_file: str, owner: str, need_annotations: bool) -> dict:
    """The json object of a COCO instances file, its structure checked; ``DataError`` naming the file, the key
    (or annotation) and what was expected."""
    expected = "expected a COCO instances json object {'images': [...], 'annotations': [...], 'categories': [...]}"
    try:
        with storage.open_file(ann_file, 'r', encoding='utf-8') as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f'{owner}: cannot read COCO annotation file {ann_file} ({type(err).__name__}: {err}); '
                        f'{expected}') from None
    if not isinstance(data, dict):
        size = f' of {len(data)} items' if isinstance(data, list) else ''
        raise DataError(f'{owner}: COCO annotation file {ann_file} holds a JSON {type(data).__name__}{size}, not an '
                        f'object; {expected}')
    required = COCO_KEYS if need_annotations else ('images', 'categories')
    for key in required:
        if key not in data:
            why = (" (a file of image entries only can be used with test_mode: true)"
                   if key == 'annotations' else '')
            raise DataError(f'{owner}: COCO annotation file {ann_file} has no {key!r} list{why}; the file has keys '
                            f'{sorted(data)}; {expected}')
    for key in COCO_KEYS:
        if key in data and not isinstance(data[key], list):
            raise DataError(f'{owner}: COCO annotation file {ann_file}: {key!r} is a {type(data[key]).__name__}; '
                            'expected a list')
    for key, fields in (('images', ('id',)), ('categories', ('id', 'name')), ('annotations', _ANNOTATION_KEYS)):
        items = data.get(key, [])
        if _has_fields(items, fields):
            continue
        for i, item in enumerate(items):
            missing = [k for k in fields if not isinstance(item, dict) or k not in item]
            if missing:
                raise DataError(f'{owner}: COCO annotation file {ann_file}: {key}[{i}] has no {missing}; expected '
                                f'an object with {list(fields)}')
    check_ids(data, ann_file, owner)
    return data


def _has_fields(items: list, fields: Sequence[str]) -> bool:
    """Whether every item is a dict holding ``fields``: one pass in C per field (a file of a million annotations);
    the caller looks for the first item without them only when this is False."""
    try:
        for name in fields:
            list(map(dict.__getitem__, items, repeat(name)))
    except (KeyError, TypeError):
        return False
    return True


def read_coco_json(ann_file: str, owner: str = 'CocoDataset', need_annotations: bool = True) -> dict:
    """The json object of a COCO instances file (a path or URL), its structure and ids checked (``load_coco``
    without pycocotools' index: what ``CocoDataset`` indexes itself).

    Raises:
        DataFileNotFoundError: no such file.
        DataError: unreadable json, a missing list or field, a repeated or malformed id.
    """
    if not storage.isfile(ann_file):
        raise DataFileNotFoundError(f'{owner}: annotation file {ann_file} not found')
    return _coco_json(ann_file, owner, need_annotations)


def load_coco(ann_file: str, owner: str = 'CocoDataset', need_annotations: bool = True) -> COCO:
    """The annotation json as a pycocotools ``COCO`` (its prints silenced), its structure checked first so that
    a wrong file gets a message naming it and the missing key rather than pycocotools' assertion, and its ids
    checked unique (``coco_checks.check_ids``: pycocotools would keep one entry of a repeated id silently).
    ``need_annotations=False`` accepts a file of image entries only (test sets)."""
    coco = COCO()
    coco.dataset = read_coco_json(ann_file, owner, need_annotations)
    with contextlib.redirect_stdout(io.StringIO()):
        coco.createIndex()
    return coco


def match_categories(coco: COCO, classes: Sequence[str], ann_file: str, owner: str = 'CocoDataset') -> list[int]:
    """The file's category id of each class name, in the order of ``classes`` (matched by name)."""
    return category_ids(coco.dataset['categories'], classes, ann_file, owner)


def category_ids(categories: list[dict], classes: Sequence[str], ann_file: str, owner: str = 'CocoDataset') -> list:
    """The category id (of the json's ``categories``) of each class name, in the order of ``classes``; a
    ``DataError`` for a class that is no category or names several."""
    by_name: dict[str, list[int]] = {}
    for cat in categories:
        by_name.setdefault(str(cat.get('name')), []).append(cat['id'])
    cat_ids = []
    for name in classes:
        ids = by_name.get(name)
        if not ids:
            raise DataError(f"{owner}: class {name!r} is not a category of {ann_file}; the file's categories are "
                            f'{sorted(by_name)}; fix `classes` (names are matched exactly)')
        if len(ids) > 1:
            raise DataError(f'{owner}: {ann_file} has {len(ids)} categories named {name!r} (ids {ids}); '
                            'expected unique category names')
        cat_ids.append(ids[0])
    return cat_ids


@DATASETS.register_module()
class CocoDataset(DetectionDataset):
    """COCO instances json: ``data_root/ann_file`` with images under ``data_root/data_prefix['img']``.

    ``classes`` are names (default: the 80 COCO classes in the standard order) matched by name to the
    file's categories, so class indices follow ``classes`` and not the file's ids; annotations of other
    categories are dropped (the way to train on a subset). Crowd annotations (``iscrowd=1``) become
    ignored instances. Segmentations are kept as ``mask`` (the usable polygons, or RLE dicts whose size is the
    image's; see ``coco_build``) for ``LoadAnnotations(with_mask=True)``; ``ann_id`` is the annotation's id
    (named in errors). Boxes are converted from xywh to xyxy and clipped to the image.

    The kept instances are arrays shared by DataLoader workers (``coco_index``; no pycocotools index is built), an
    image's ``instances`` made when the sample is asked for. Checked at load: ids unique and numbers or strings
    (``coco_checks.check_ids``: a ``DataError`` naming both entries of a repeated id); every polygon coordinate
    and bbox value a finite number. Bad annotations (also an RLE of another size than the image, and, when the
    pipeline loads masks for training, an instance without a polygon of >= 3 points enclosing an area) follow
    ``on_bad_annotation`` (see ``detection.datasets.annotation_checks``). Outside ``test_mode``, a file left
    without a usable (kept, non-crowd) instance is a ``DataError`` counting the annotations left out per
    reason, and ``filter_empty_gt`` drops images without a non-ignored box.

    ``metainfo`` holds ``classes`` and ``palette`` from construction on (also with ``lazy_init``), plus
    ``cat_ids`` (category id per class index) and ``ann_file`` (absolute path) once loaded.
    """

    METAINFO: dict = {'classes': COCO_CLASSES}
    ann_hint = 'the COCO json, relative to data_root'

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        # load_data_list has set it unless lazy_init (for a URL: the local copy the evaluator reads)
        self._metainfo.setdefault('ann_file', storage.absolute(self.ann_file))

    def load_data_list(self) -> list[dict]:
        """Read the json once, check it and index its kept instances in arrays (``coco_build.build_index``):
        one record per image, its instances made from the arrays when the sample is asked for
        (``get_data_info``). The json's objects are dropped when this returns, before Python's cyclic garbage
        collector runs again (``_gc_paused``).

        Raises:
            DataError: a bad annotation under ``on_bad_annotation: fail``; for training (not ``test_mode``), no
                usable instance left in the whole file (``annotation_checks.require_usable_instances``, which
                counts the annotations left out per reason).
        """
        with _gc_paused():
            return self._load_records()

    def _load_records(self) -> list[dict]:
        owner = type(self).__name__
        ann_file = storage.absolute(self.ann_file)
        data = read_coco_json(ann_file, owner, need_annotations=not self.test_mode)
        cat_ids = category_ids(data['categories'], self._metainfo['classes'], ann_file, owner)
        # the evaluator (pycocotools) reads a local file: a URL's json is copied into the storage cache once
        self._metainfo.update(cat_ids=cat_ids, ann_file=storage.local_copy(ann_file))
        problems = checks.AnnotationProblems(self.on_bad_annotation, ann_file, owner)
        records, self._index, dropped = build_index(
            data, cat_ids, self.data_prefix['img'], not self.test_mode and pipeline_loads_masks(self.pipeline),
            problems, ann_file, owner)
        if not self.test_mode and not self._index.usable_images(_spans(records)).any():
            expanded = [{'instances': self._index.instances(*r['_instances'])} for r in records]
            checks.require_usable_instances(expanded, dropped, len(data.get('annotations', [])),
                                            len(data['images']), owner, ann_file, ignored_as=CROWD)
        problems.warn()
        return records

    def filter_data(self) -> list[dict]:
        """Drop images without a non-ignored box (``filter_empty_gt``, training only); fail when none is left."""
        drop_empty = self.filter_empty_gt and not self.test_mode
        kept = self.data_list
        if drop_empty:
            usable = self._index.usable_images(_spans(self.data_list))
            kept = [r for r, ok in zip(self.data_list, usable.tolist()) if ok]
        if not kept:  # the message of annotation_checks.filter_images
            checks.filter_images([{'instances': []}] * len(self.data_list), drop_empty, type(self).__name__,
                                 storage.absolute(self.ann_file))
        return kept

    def full_init(self) -> None:
        """mmengine's, then (``serialize_data: false``) every record expanded, so that ``data_list`` holds the
        usual data infos (what the converters read)."""
        if self._fully_initialized:
            return
        super().full_init()
        if not self.serialize_data:
            self.data_list = [self._expand(r) for r in self.data_list]

    def _expand(self, record: dict) -> dict:
        """The data info of a record: ``_instances`` rows replaced by the ``instances`` list (in the same place
        among the keys, ``sample_idx`` after them)."""
        span = record.pop('_instances', None)
        if span is None:
            return record
        sample_idx = record.pop('sample_idx', None)
        record['instances'] = self._index.instances(*span)
        if sample_idx is not None:
            record['sample_idx'] = sample_idx
        return record

    @force_full_init
    def get_data_info(self, idx: int) -> dict:
        """The image's data info: ``img_path``, ``img_id``, ``height``, ``width``, ``instances`` (made now from
        the shared arrays) and ``sample_idx``."""
        return self._expand(super().get_data_info(idx))


@contextlib.contextmanager
def _gc_paused():
    """Python's cyclic garbage collector off while the json is parsed, indexed and dropped: its collections,
    triggered by the millions of objects ``json.load`` makes (none of them garbage), would walk them again and again
    (and walk torch's objects beside them), seconds for a file of a million boxes."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _spans(records: Sequence[dict]) -> np.ndarray:
    """int64 [I, 2]: the ``(start, end)`` instance rows of each record."""
    return np.array([r['_instances'] for r in records], dtype=np.int64).reshape(-1, 2)


__all__ = ['COCO_CLASSES', 'CROWD', 'DEGENERATE_POLYGON_KINDS', 'OTHER_CATEGORY', 'CocoDataset', 'category_ids',
           'load_coco', 'match_categories', 'read_coco_json', 'segmentation_mask']
