"""Checking a COCO instances file and indexing its kept instances in a few vectorised passes (``build_index``).

Why not pycocotools' index: ``COCO.createIndex`` and one dict per instance double the json's memory for a file of a
million boxes. Here the json's lists are read field by field into numpy arrays, every box / category / polygon check
runs on whole arrays, and a loop in Python visits each image once and only the annotations that have a problem (to
report them in file order with the messages of ``annotation_checks``). The result is the same as checking annotation
by annotation: the same instances in the same order, the same errors under ``on_bad_annotation: fail`` (the first
problem in the order images, then annotations, are listed) and the same warning and counts under ``skip``.
"""

from __future__ import annotations

import operator
import os
from collections import Counter
from collections.abc import Sequence
from itertools import repeat

import numpy as np

from detection.datasets import annotation_checks as checks
from detection.datasets.coco_checks import MALFORMED_MASK, POLYGON_FEW_POINTS, POLYGON_ZERO_AREA, polygon_table
from detection.datasets.coco_index import (
    MASK_NONE,
    MASK_PACKED,
    MASK_POLYGONS,
    CocoIndex,
    box_array,
    id_array,
    pack_objects,
)
from oars.data import storage
from oars.errors import DataError

# polygons no mask can be made of: a warning with counts (a whole set of them is an error: require_usable_instances)
DEGENERATE_POLYGON_KINDS = frozenset({POLYGON_FEW_POINTS, POLYGON_ZERO_AREA})
CROWD = 'crowd (iscrowd: 1)'  # why an instance is not usable for training, though kept (ignored)
OTHER_CATEGORY = 'category not in `classes`'  # why an annotation is left out without a warning

_OK, _NO_NAME, _MISSING, _UNREADABLE = 0, 1, 2, 3  # image status


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


def _image_table(images: Sequence[dict], img_prefix: str) -> tuple[list, list, np.ndarray, np.ndarray]:
    """``(status, paths, heights, widths)`` of every image: its file found and its size from the json, else from
    the file (``annotation_checks.image_size``). A local folder is listed once (``_LocalListing``) instead of one
    ``stat`` per image; a URL's folder is listed once by ``storage.listed_isfile``."""
    n = len(images)
    status, paths = [_OK] * n, [''] * n
    heights, widths = np.zeros(n, np.int64), np.zeros(n, np.int64)
    local_prefix = not storage.is_url(img_prefix)
    listing = _LocalListing()
    for k, img in enumerate(images):
        file_name = img.get('file_name')
        if not isinstance(file_name, str) or not file_name:
            status[k] = _NO_NAME
            continue
        local = local_prefix and '://' not in file_name and '::' not in file_name
        paths[k] = path = os.path.join(img_prefix, file_name) if local else storage.join(img_prefix, file_name)
        if not (listing.isfile(path) if local else storage.listed_isfile(path)):
            status[k] = _MISSING
            continue
        height, width = img.get('height'), img.get('width')
        if not (isinstance(height, int | float) and isinstance(width, int | float) and height > 0 and width > 0):
            size = checks.image_size(path)
            if size is None:
                status[k] = _UNREADABLE
                continue
            height, width = size
        heights[k], widths[k] = int(height), int(width)
    return status, paths, heights, widths


class _LocalListing:
    """``os.path.isfile`` answered from one ``os.scandir`` per folder (the files, symbolic links followed as
    ``isfile`` follows them); a folder that cannot be listed falls back to ``os.path.isfile``."""

    def __init__(self) -> None:
        self._folders: dict[str, set[str] | None] = {}

    def isfile(self, path: str) -> bool:
        folder, name = os.path.split(path)
        if folder not in self._folders:
            try:
                with os.scandir(folder or '.') as entries:
                    self._folders[folder] = {e.name for e in entries if e.is_file()}
            except OSError:
                self._folders[folder] = None
        names = self._folders[folder]
        return os.path.isfile(path) if names is None or not name else name in names


def _ranges_any(flags: np.ndarray, first: np.ndarray, end: np.ndarray) -> np.ndarray:
    """bool per range: whether ``flags[first:end]`` holds a True (all ranges at once)."""
    counts = np.concatenate([[0], np.cumsum(flags)])
    return counts[end] > counts[first]


class _Report:
    """Reports the problems of the annotations (``AnnotationProblems``) and counts what is left out per reason in
    the order the reasons are first met (the message of ``require_usable_instances`` lists ties in that order)."""

    def __init__(self, problems: checks.AnnotationProblems) -> None:
        self.problems = problems
        self.events: list[tuple[tuple[int, int], str, int]] = []

    def drop(self, key: tuple[int, int], kind: str, message: str | None, count: int = 1) -> None:
        """Report ``message`` (None: counted only) and count ``count`` annotations left out. Degenerate polygons
        are left out whatever the policy (COCO itself holds some)."""
        if message is not None:
            self.problems.report(kind, message, always_skip=kind in DEGENERATE_POLYGON_KINDS)
        self.events.append((key, kind, count))

    def dropped(self) -> Counter:
        out: Counter = Counter()
        for _, kind, count in sorted(self.events, key=lambda e: e[0]):
            out[kind] += count
        return out


def build_index(data: dict, cat_ids: Sequence, img_prefix: str, check_polygons: bool,
                problems: checks.AnnotationProblems, ann_file: str,
                owner: str) -> tuple[list[dict], CocoIndex, Counter]:
    """Check the annotations of a COCO json (structure and ids already checked) and index the kept ones.

    Args:
        data: the json object.
        cat_ids: the category id of each class index (``coco.match_categories``).
        img_prefix: the folder (or URL) the images' ``file_name`` are relative to.
        check_polygons: masks are loaded for training: a non-crowd instance needs a usable polygon.
        problems: the bad-annotation policy (raises under ``fail``).
        ann_file, owner: named in the messages.

    Returns:
        ``(records, index, dropped)``: one record per kept image (``img_path``, ``img_id``, ``height``, ``width``
        and ``_instances``, its ``(start, end)`` rows of ``index``), in file order; the kept instances; the
        annotations left out per reason.
    """
    images, anns = data['images'], data.get('annotations', [])
    n_ann = len(anns)
    report = _Report(problems)
    img_pos = {img['id']: k for k, img in enumerate(images)}
    ann_img = np.fromiter(map(img_pos.get, [a['image_id'] for a in anns], repeat(-1)), np.int64, n_ann)
    for j in np.flatnonzero(ann_img < 0).tolist():
        a = anns[j]
        report.drop((-1, j), checks.UNKNOWN_IMAGE, f"{ann_file}: annotation id {a['id']}: image_id "
                    f"{a['image_id']!r} is not in 'images'; expected the id of a listed image")
    status, paths, heights, widths = _image_table(images, img_prefix)
    img_ok = np.array([s == _OK for s in status] + [False], dtype=bool)  # [-1]: an unknown image
    heights, widths = np.append(heights, 0), np.append(widths, 0)

    # category: the class index, -1 for a category not in `classes`, -2 for an id not among the categories
    code_of = dict.fromkeys((c['id'] for c in data['categories']), -1)
    code_of.update((cid, i) for i, cid in enumerate(cat_ids))
    code = np.fromiter(map(code_of.get, [a['category_id'] for a in anns], repeat(-2)), np.int64, n_ann)
    xywh, box_ok = box_array(list(map(dict.get, anns, repeat('bbox'))))
    x1, y1 = xywh[:, 0], xywh[:, 1]
    x2, y2 = x1 + xywh[:, 2], y1 + xywh[:, 3]
    width, height = widths[ann_img].astype(np.float64), heights[ann_img].astype(np.float64)
    bad_box = ~box_ok | (x2 <= x1) | (y2 <= y1) | (x2 <= 0) | (y2 <= 0) | (x1 >= width) | (y1 >= height)
    crowd = np.fromiter(map(bool, map(dict.get, anns, repeat('iscrowd'), repeat(0))), bool, n_ann)

    segs = list(map(dict.get, anns, repeat('segmentation')))
    table = polygon_table(anns, by_position=True, segmentations=segs)
    is_poly = table.end > table.first
    good_value = table.numeric & table.finite
    corrupt = is_poly & _ranges_any(~good_value, table.first, table.end)
    usable_any = _ranges_any(table.usable, table.first, table.end)
    examined = img_ok[ann_img] & (code >= 0) & ~bad_box  # what reaches the mask checks
    mask_bad = examined & (corrupt | (is_poly & check_polygons & ~crowd & ~usable_any))
    has_seg = np.fromiter(map(operator.is_not, segs, repeat(None)), bool, n_ann) & ~np.fromiter(
        map(operator.eq, segs, repeat([])), bool, n_ann)  # neither missing nor []
    other_seg = np.flatnonzero(examined & ~is_poly & has_seg)
    seg_problem: dict[int, str] = {}
    for j in other_seg.tolist():
        k = int(ann_img[j])
        _, why = segmentation_mask(segs[j], int(widths[k]), int(heights[k]))
        if why is not None:
            seg_problem[j] = why
            mask_bad[j] = True
    problem = img_ok[ann_img] & ((code == -2) | ((code >= 0) & (bad_box | mask_bad)))
    kept = examined & ~mask_bad

    # annotations of listed images, by image then in file order
    order = np.flatnonzero(ann_img >= 0)
    order = order[np.argsort(ann_img[order], kind='stable')]
    img_end = np.cumsum(np.bincount(ann_img[order], minlength=len(images)))
    kept_end = np.concatenate([[0], np.cumsum(kept[order])])
    other = np.flatnonzero(img_ok[ann_img[order]] & (code[order] == -1))
    if other.size:
        report.drop((int(ann_img[order[other[0]]]), int(other[0])), OTHER_CATEGORY, None, count=int(other.size))
    sorted_problems = np.flatnonzero(problem[order]).tolist()
    cats = sorted(code_of)  # for messages
    records, p = [], 0
    for k, img in enumerate(images):
        lo, hi = (int(img_end[k - 1]) if k else 0), int(img_end[k])
        img_id = img['id']
        if status[k] == _NO_NAME:
            raise DataError(f"{owner}: {ann_file}: image id {img_id!r} has no 'file_name'")
        where = f"{ann_file}: image id {img_id} ({img['file_name']})"
        if status[k] != _OK:
            if status[k] == _MISSING:
                checks.checked_image(paths[k], problems, where)  # reports it (and raises under 'fail')
                report.drop((k, -1), checks.MISSING_IMAGE, None, count=hi - lo)
            else:
                report.drop((k, -1), checks.UNREADABLE_IMAGE, f'{where}: no width/height in the file and OpenCV '
                            f'cannot read {paths[k]}; expected a readable image', count=hi - lo)
            while p < len(sorted_problems) and sorted_problems[p] < hi:
                p += 1
            continue
        while p < len(sorted_problems) and sorted_problems[p] < hi:
            s = sorted_problems[p]
            j = int(order[s])
            kind, message = _problem(anns[j], j, int(code[j]), f"{where}, annotation id {anns[j]['id']}", table,
                                     seg_problem, int(widths[k]), int(heights[k]), cats)
            report.drop((k, s), kind, message)
            p += 1
        records.append({'img_path': paths[k], 'img_id': img_id, 'height': int(heights[k]),
                        'width': int(widths[k]), '_instances': (int(kept_end[lo]), int(kept_end[hi]))})

    rows = order[kept[order]]  # the kept annotations, by image
    index = _index(rows, code, crowd, x1, y1, x2, y2, width, height, id_array([a['id'] for a in anns]), segs,
                   is_poly, table)
    return records, index, report.dropped()


def _problem(ann: dict, j: int, code: int, at: str, table, seg_problem: dict[int, str], width: int, height: int,
             cats: list) -> tuple[str, str]:
    """``(kind, message)`` of annotation ``j``, found bad by the vectorised checks (the first check it fails, in
    the order: category, bbox, box on the image, mask)."""
    if code == -2:
        return checks.UNKNOWN_CATEGORY, (f"{at}: category_id {ann['category_id']!r} is not among the file's "
                                         f'categories; expected one of {cats}')
    xywh = checks.as_box(ann.get('bbox'))
    if xywh is None:
        return checks.MALFORMED_BOX, (f"{at}: bbox {ann.get('bbox')!r}; expected [x, y, width, height] of 4 finite "
                                      'numbers')
    x, y, w, h = xywh
    bad = checks.box_problem([x, y, x + w, y + h], width, height)
    if bad is not None:
        return bad[0], f'{at}: bbox (xywh) {checks.fmt_box(xywh)}: {bad[1]}'
    if j in seg_problem:
        return MALFORMED_MASK, f'{at}: {seg_problem[j]}'
    corrupt = table.corrupt(j)
    if corrupt is not None:
        return MALFORMED_MASK, f'{at}: {corrupt}'
    kind, why = table.unusable(j)
    return kind, f'{at}: segmentation has no usable polygon: {why} (a mask model cannot learn from an empty mask)'


def _index(rows: np.ndarray, code: np.ndarray, crowd: np.ndarray, x1, y1, x2, y2, width, height, ids: np.ndarray,
           segs: list, is_poly: np.ndarray, table) -> CocoIndex:
    """The ``CocoIndex`` of the annotations ``rows`` (by image): boxes clipped to the image, polygons (the usable
    ones, as ``values`` offsets) and RLE dicts packed."""
    w, h = width[rows], height[rows]
    boxes = np.stack([np.minimum(np.maximum(x1[rows], 0.0), w), np.minimum(np.maximum(y1[rows], 0.0), h),
                      np.minimum(np.maximum(x2[rows], 0.0), w), np.minimum(np.maximum(y2[rows], 0.0), h)], axis=1)
    poly = is_poly[rows]
    is_dict = np.fromiter(map(isinstance, segs, repeat(dict)), bool, len(segs))
    packed_rows = np.flatnonzero(~poly & is_dict[rows])
    kind = np.full(len(rows), MASK_NONE, np.int8)
    ref = np.zeros(len(rows), np.int64)
    poly_rows = np.flatnonzero(poly)
    kind[poly_rows], ref[poly_rows] = MASK_POLYGONS, np.arange(len(poly_rows))
    kind[packed_rows], ref[packed_rows] = MASK_PACKED, np.arange(len(packed_rows))
    # the polygons of each polygon instance (in row order), its unusable ones left out
    first, end = table.first[rows[poly_rows]], table.end[rows[poly_rows]]
    lengths = end - first
    owner = np.repeat(np.arange(len(poly_rows)), lengths)
    polygon = np.repeat(first, lengths) + (np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths,
                                                                                     lengths))
    keep = table.usable[polygon]
    polygon, owner = polygon[keep], owner[keep]
    poly_ends = np.cumsum(np.bincount(owner, minlength=len(poly_rows))).astype(np.int64)
    packed, packed_ends = pack_objects([segs[j] for j in rows[packed_rows].tolist()])
    return CocoIndex(boxes=boxes, labels=code[rows], ignore=crowd[rows].astype(np.int8),
                     ann_ids=ids[rows], mask_kind=kind, mask_ref=ref,
                     poly_ends=poly_ends, pv_start=table.starts[polygon], pv_len=table.lengths[polygon],
                     values=table.values, packed=packed, packed_ends=packed_ends)


__all__ = ['CROWD', 'DEGENERATE_POLYGON_KINDS', 'OTHER_CATEGORY', 'build_index']
