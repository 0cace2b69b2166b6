"""COCO-format detection data set (instances json), read once with pycocotools."""

from __future__ import annotations

import contextlib
import io
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from pycocotools.coco import COCO

from detection.datasets import annotation_checks as checks
from detection.datasets.base import DetectionDataset, pipeline_loads_masks
from detection.datasets.coco_checks import (
    MALFORMED_MASK,
    POLYGON_FEW_POINTS,
    POLYGON_ZERO_AREA,
    PolygonTable,
    check_ids,
    polygon_table,
)
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
        for i, item in enumerate(data.get(key, [])):
            missing = [k for k in fields if not isinstance(item, dict) or k not in item]
            if missing:
                raise DataError(f'{owner}: COCO annotation file {ann_file}: {key}[{i}] has no {missing}; expected '
                                f'an object with {list(fields)}')
    check_ids(data, ann_file, owner)
    return data


def load_coco(ann_file: str, owner: str = 'CocoDataset', need_annotations: bool = True) -> COCO:
    """The annotation json as a pycocotools ``COCO`` (its prints silenced), its structure checked first so that
    a wrong file gets a message naming it and the missing key rather than pycocotools' assertion, and its ids
    checked unique (``coco_checks.check_ids``: pycocotools would keep one entry of a repeated id silently).
    ``need_annotations=False`` accepts a file of image entries only (test sets)."""
    if not storage.isfile(ann_file):
        raise DataFileNotFoundError(f'{owner}: annotation file {ann_file} not found')
    coco = COCO()
    coco.dataset = _coco_json(ann_file, owner, need_annotations)
    with contextlib.redirect_stdout(io.StringIO()):
        coco.createIndex()
    return coco


def match_categories(coco: COCO, classes: Sequence[str], ann_file: str, owner: str = 'CocoDataset') -> list[int]:
    """The file's category id of each class name, in the order of ``classes`` (matched by name)."""
    by_name: dict[str, list[int]] = {}
    for cat in coco.dataset['categories']:
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


def _rle_problem(rle: dict, width: int, height: int) -> str | None:
    """Why a COCO RLE dict cannot be the mask of a ``width`` x ``height`` image, or None when it can.

    Checks what is cheap at load time: ``size`` is the image's [height, width]; ``counts`` is a string
    (compressed) or a list of non-negative ints summing to height * width (uncompressed). A compressed string
    is decoded (and checked by pycocotools) when the sample is loaded."""
    size, counts = rle.get('size'), rle.get('counts')
    if not (isinstance(size, list | tuple) and len(size) == 2 and all(isinstance(v, int) for v in size)):
        return f"RLE 'size' {size!r}; expected [height, width] of the image, [{height}, {width}]"
    if tuple(size) != (height, width):
        return (f"RLE 'size' [height, width] = {list(size)} but the image is {width}x{height} (WxH); expected "
                f'[{height}, {width}] (a mask made for another image size cannot be aligned with this image)')
    if isinstance(counts, str | bytes):
        return None if counts else "RLE 'counts' is an empty string"
    if not isinstance(counts, list) or not all(isinstance(v, int) and v >= 0 for v in counts):
        return "RLE 'counts' must be a string (compressed) or a list of non-negative ints (uncompressed)"
    if sum(counts) != height * width:
        return f"RLE 'counts' cover {sum(counts)} pixels; expected height * width = {height * width}"
    return None


def segmentation_mask(segmentation: object, width: int, height: int) -> tuple[dict | None, str | None]:
    """``(mask, problem)`` of a COCO ``segmentation`` that is not a list of polygons (those are read for the
    whole file at once by ``coco_checks.polygon_table``).

    - missing or ``[]`` -> ``(None, None)``: no mask (box-only data; ``LoadAnnotations(with_mask=True)``
      then says so);
    - an RLE dict -> kept as it is (compressed or uncompressed) when ``_rle_problem`` finds nothing;
    - anything else, or a bad RLE -> ``(None, why)`` for the bad-annotation policy.
    """
    if segmentation is None or (isinstance(segmentation, list) and not segmentation):
        return None, None
    if isinstance(segmentation, dict):
        problem = _rle_problem(segmentation, width, height)
        return (None, problem) if problem else (segmentation, None)
    return None, (f'segmentation of type {type(segmentation).__name__}; expected a list of polygons '
                  "[[x1, y1, x2, y2, ...], ...] or an RLE dict {'counts', 'size'}")


# polygons no mask can be made of: a warning with counts (a whole set of them is an error: require_usable_instances)
DEGENERATE_POLYGON_KINDS = frozenset({POLYGON_FEW_POINTS, POLYGON_ZERO_AREA})
CROWD = 'crowd (iscrowd: 1)'  # why an instance is not usable for training, though kept (ignored)
OTHER_CATEGORY = 'category not in `classes`'  # why an annotation is left out without a warning


@dataclass
class _FileContext:
    """What the annotations of one COCO file are checked against while loading, and what was left out.

    ``dropped`` counts the annotations left out per reason (an image left out counts all its annotations), for
    the message of a training set without a usable instance; ``problems`` follows ``on_bad_annotation``.
    """

    ann_file: str
    coco: COCO
    label_of: dict
    polygons: PolygonTable
    check_polygons: bool  # masks are loaded for training: an instance needs a usable polygon
    problems: checks.AnnotationProblems
    dropped: Counter = field(default_factory=Counter)

    def drop(self, kind: str, message: str, count: int = 1) -> None:
        """Report a problem (raises under ``on_bad_annotation: fail``, except for degenerate polygons: those are
        dropped and counted in the one warning whatever the policy, since COCO itself holds some) and count
        ``count`` annotations left out."""
        self.problems.report(kind, message, always_skip=kind in DEGENERATE_POLYGON_KINDS)
        self.dropped[kind] += count


def _instance_mask(ann: dict, width: int, height: int, ctx: _FileContext,
                   need_polygon: bool) -> tuple[list | dict | None, tuple[str, str] | None]:
    """``(mask, (kind, why) or None)`` for an instance's ``mask`` field.

    Polygons come from the file's ``PolygonTable``: a value that is not a finite number is always a problem
    (pycocotools would crash on it, whatever the pipeline); only the usable polygons (>= 3 points enclosing an
    area) are kept, and with ``need_polygon`` (masks loaded for training) an instance with none is a problem of
    the kind of its best polygon. Without it such an instance keeps ``mask=[]``, which ``LoadAnnotations``
    makes an ignored instance with an empty mask (as MMDetection does; what an evaluation set needs). RLE and
    other segmentations go through ``segmentation_mask``.
    """
    segmentation = ann.get('segmentation')
    if not (isinstance(segmentation, list) and segmentation):
        mask, why = segmentation_mask(segmentation, width, height)
        return mask, (None if why is None else (MALFORMED_MASK, why))
    corrupt = ctx.polygons.corrupt(ann['id'])
    if corrupt is not None:
        return None, (MALFORMED_MASK, corrupt)
    unusable = ctx.polygons.unusable(ann['id']) if need_polygon else None
    if unusable is not None:
        return None, (unusable[0], f'segmentation has no usable polygon: {unusable[1]} (a mask model cannot learn '
                                   'from an empty mask)')
    return ctx.polygons.polygons(ann['id']), None


@DATASETS.register_module()
class CocoDataset(DetectionDataset):
    """COCO instances json: ``data_root/ann_file`` with images under ``data_root/data_prefix['img']``.

    ``classes`` are names (default: the 80 COCO classes in the standard order) matched by name to the
    file's categories, so class indices follow ``classes`` and not the file's ids; annotations of other
    categories are dropped (the way to train on a subset). Crowd annotations (``iscrowd=1``) become
    ignored instances. Segmentations are kept as ``mask`` (the usable polygons, or RLE dicts whose size is the
    image's; see ``_instance_mask``) for ``LoadAnnotations(with_mask=True)``; ``ann_id`` is the annotation's id
    (named in errors). Boxes are converted from xywh to xyxy and clipped to the image.

    Checked at load, before pycocotools sees the file: ids unique and numbers or strings
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
        """Read the json once and return one data info per image (see the class docstring).

        Raises:
            DataError: a bad annotation under ``on_bad_annotation: fail``; for training (not ``test_mode``), no
                usable instance left in the whole file (``annotation_checks.require_usable_instances``, which
                counts the annotations left out per reason).
        """
        owner = type(self).__name__
        ann_file = storage.absolute(self.ann_file)
        coco = load_coco(ann_file, owner, need_annotations=not self.test_mode)
        cat_ids = match_categories(coco, self._metainfo['classes'], ann_file, owner)
        # the evaluator (pycocotools) reads a local file: a URL's json is copied into the storage cache once
        self._metainfo.update(cat_ids=cat_ids, ann_file=storage.local_copy(ann_file))
        annotations = coco.dataset.get('annotations', [])
        ctx = _FileContext(
            ann_file=ann_file, coco=coco, label_of={cid: i for i, cid in enumerate(cat_ids)},
            polygons=polygon_table(annotations), check_polygons=not self.test_mode and pipeline_loads_masks(
                self.pipeline), problems=checks.AnnotationProblems(self.on_bad_annotation, ann_file, owner))
        for ann in annotations:
            if ann['image_id'] not in coco.imgs:
                ctx.drop(checks.UNKNOWN_IMAGE, f"{ann_file}: annotation id {ann['id']}: image_id "
                         f"{ann['image_id']!r} is not in 'images'; expected the id of a listed image")
        data_list = []
        for img_id, img in coco.imgs.items():
            info = self._image_info(img_id, img, ctx)
            if info is not None:
                data_list.append(info)
        if not self.test_mode:
            checks.require_usable_instances(data_list, ctx.dropped, len(annotations), len(coco.imgs), owner,
                                            ann_file, ignored_as=CROWD)
        ctx.problems.warn()
        return data_list

    def _image_info(self, img_id, img: dict, ctx: _FileContext) -> dict | None:
        """The data info of one image, or None when the image is left out (missing or unreadable, under
        ``on_bad_annotation: skip``; its annotations are counted as left out)."""
        file_name = img.get('file_name')
        if not isinstance(file_name, str) or not file_name:
            raise DataError(f"{type(self).__name__}: {ctx.ann_file}: image id {img_id!r} has no 'file_name'")
        img_path = storage.join(self.data_prefix['img'], file_name)
        where = f'{ctx.ann_file}: image id {img_id} ({file_name})'
        anns = ctx.coco.imgToAnns.get(img_id, [])
        if not checks.checked_image(img_path, ctx.problems, where):
            ctx.dropped[checks.MISSING_IMAGE] += len(anns)
            return None
        height, width = img.get('height'), img.get('width')
        if not (isinstance(height, int | float) and isinstance(width, int | float) and height > 0 and width > 0):
            size = checks.image_size(img_path)
            if size is None:
                ctx.drop(checks.UNREADABLE_IMAGE, f'{where}: no width/height in the file and OpenCV cannot read '
                         f'{img_path}; expected a readable image', count=len(anns))
                return None
            height, width = size
        instances = []
        for ann in anns:
            inst = self._instance(ann, int(width), int(height), where, ctx)
            if inst is not None:
                instances.append(inst)
        return {'img_path': img_path, 'img_id': img_id, 'height': int(height), 'width': int(width),
                'instances': instances}

    @staticmethod
    def _instance(ann: dict, width: int, height: int, where: str, ctx: _FileContext) -> dict | None:
        """The instance of one annotation, or None when it is left out (another category; a bad box or mask
        under ``on_bad_annotation: skip``)."""
        at = f"{where}, annotation id {ann['id']}"
        cat_id = ann['category_id']
        if cat_id not in ctx.coco.cats:
            ctx.drop(checks.UNKNOWN_CATEGORY, f"{at}: category_id {cat_id!r} is not among the file's categories; "
                     f'expected one of {sorted(ctx.coco.cats)}')
            return None
        if cat_id not in ctx.label_of:  # a category the config did not ask for
            ctx.dropped[OTHER_CATEGORY] += 1
            return None
        xywh = checks.as_box(ann.get('bbox'))
        if xywh is None:
            ctx.drop(checks.MALFORMED_BOX, f"{at}: bbox {ann.get('bbox')!r}; expected [x, y, width, height] of 4 "
                     'finite numbers')
            return None
        x, y, w, h = xywh
        box = [x, y, x + w, y + h]
        bad = checks.box_problem(box, width, height)
        if bad is not None:
            ctx.drop(bad[0], f'{at}: bbox (xywh) {checks.fmt_box(xywh)}: {bad[1]}')
            return None
        crowd = bool(ann.get('iscrowd', 0))
        mask, problem = _instance_mask(ann, width, height, ctx, need_polygon=ctx.check_polygons and not crowd)
        if problem is not None:
            ctx.drop(problem[0], f'{at}: {problem[1]}')
            return None
        inst = {'bbox': checks.clip_box(box, width, height), 'bbox_label': ctx.label_of[cat_id],
                'ignore_flag': int(crowd), 'ann_id': ann['id']}
        if mask is not None:
            inst['mask'] = mask
        return inst

    def filter_data(self) -> list[dict]:
        """Drop images without a non-ignored box (``filter_empty_gt``, training only); fail when none is left."""
        drop_empty = self.filter_empty_gt and not self.test_mode
        return checks.filter_images(self.data_list, drop_empty, type(self).__name__, storage.absolute(self.ann_file))
