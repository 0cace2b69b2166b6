"""Checks of a COCO instances json that pycocotools does not make: unique ids, and polygons it can rasterise.

Why here and not in pycocotools: ``COCO.createIndex`` keys dicts by id, so an image or annotation whose id
repeats another's replaces it silently (one annotated image disappears from training), and an unhashable id
stops it with a bare ``TypeError``; ``mask.frPyObjects`` segfaults or eats all memory on a NaN coordinate, and
rasterises a polygon of fewer than 3 points or of zero area into an empty mask, so a Mask R-CNN trained on
such a file learns nothing (loss_bbox = loss_mask = 0) and exits 0. So ids are checked on the raw json before
pycocotools sees it, and every polygon of the file is read once into numpy arrays (``PolygonTable``): finite
numbers, point count and area (shoelace) are then computed for all polygons in a few vectorised passes.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain, compress, repeat

import numpy as np

from oars.errors import DataError

# Problem kinds of a segmentation (the keys of the counts in warnings and errors): one that cannot be a mask of
# its image at all, and an instance without a usable polygon.
MALFORMED_MASK = 'malformed mask'
POLYGON_FEW_POINTS = 'polygon with fewer than 3 points'
POLYGON_ZERO_AREA = 'zero-area polygon'
# A polygon enclosing less than this many square pixels has "zero area": collinear points give exactly 0 up
# to float rounding, and pycocotools rasterises such a sliver into an empty mask.
MIN_POLYGON_AREA = 1e-6
_CHUNK_POINTS = 1 << 20  # points per vectorised area pass (bounds its temporary arrays to ~100 MB)


# ---- ids ----------------------------------------------------------------------------------------------------
def _is_id(value: object) -> bool:
    """Whether ``value`` can be a COCO id: a number (not a bool) or a string, so it can key pycocotools' dicts."""
    return isinstance(value, int | float | str) and not isinstance(value, bool)


def _label(key: str, item: dict) -> str:
    """What names an entry of ``key`` to a user beside its id: the file name of an image, the name of a
    category, the image id of an annotation."""
    name = {'images': 'file_name', 'categories': 'name', 'annotations': 'image_id'}[key]
    return repr(item.get(name)) if key != 'annotations' else str(item.get(name))


def check_ids(data: dict, ann_file: str, owner: str) -> None:
    """Raise ``DataError`` unless every image, annotation and category id of ``data`` is a number or string and
    unique within its list, and every annotation's ``image_id`` and ``category_id`` is a number or string.

    Args:
        data: the json object, its lists and their ``id`` fields already checked to exist.
        ann_file: the file, named in the message.
        owner: the dataset class name, the start of the message.

    Raises:
        DataError: naming the file, both entries of a repeated id (list index, id, and their file names, names or
            image ids), or the entry and the value of an id that is not a number or string.
    """
    for key in ('images', 'annotations', 'categories'):
        items = data.get(key, [])
        if _ids_fine(items, key == 'annotations'):
            continue
        seen: dict[Hashable, int] = {}
        for i, item in enumerate(items):
            fields = ('id', 'image_id', 'category_id') if key == 'annotations' else ('id',)
            for name in fields:
                if not _is_id(item[name]):
                    raise DataError(f'{owner}: COCO annotation file {ann_file}: {key}[{i}] has {name} '
                                    f'{item[name]!r}; expected a number or a string')
            first = seen.setdefault(item['id'], i)
            if first != i:
                raise DataError(_duplicate_message(key, items[first], first, item, i, ann_file, owner))


_ID_TYPES = frozenset({int, float, str})


def _ids_fine(items: list, annotations: bool) -> bool:
    """Whether every ``id`` (and, for annotations, ``image_id`` and ``category_id``) of ``items`` is a number or
    a string and the ids are unique: a few passes in C for a file of a million annotations; ``check_ids`` walks the
    list for the message only when this is False."""
    ids = [item['id'] for item in items]
    fields = [ids] + ([[a['image_id'] for a in items], [a['category_id'] for a in items]] if annotations else [])
    return all(set(map(type, f)) <= _ID_TYPES for f in fields) and len(set(ids)) == len(ids)


_DUPLICATE_LOSS = {
    'images': 'pycocotools keeps the last entry of an id, so one image and its annotations would be lost silently',
    'annotations': 'pycocotools keeps the last entry of an id, so one annotation would be lost silently',
    'categories': "the annotations' category_id could not tell the two apart",
}


def _duplicate_message(key: str, a: dict, i: int, b: dict, j: int, ann_file: str, owner: str) -> str:
    """The message of two entries ``key[i]`` and ``key[j]`` sharing an id."""
    both = (f'image ids {_label(key, a)} and {_label(key, b)}' if key == 'annotations'
            else f'{_label(key, a)}, {_label(key, b)}')
    noun = {'images': 'image', 'annotations': 'annotation', 'categories': 'category'}[key]
    return (f'{owner}: COCO annotation file {ann_file}: {key}[{i}] and {key}[{j}] both have id {a["id"]!r} '
            f'({both}); expected unique {noun} ids ({_DUPLICATE_LOSS[key]})')


# ---- polygons -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PolygonTable:
    """Every polygon of a COCO file's polygon segmentations, read once into flat arrays.

    Attributes:
        raw: the polygons as in the json (items of the ``segmentation`` lists), for messages.
        values: float64 [V], the numbers of all list polygons one after the other (NaN for a polygon holding
            something that ``float`` refuses).
        starts: int64 [P], where each polygon's numbers start in ``values``; ``lengths`` int64 [P] how many.
        is_list: bool [P], the item is a list (a flat list of numbers as ``segmentation`` has number items).
        numeric: bool [P], ``float`` takes all its items; ``finite``: bool [P], all of them finite.
        area: float64 [P], the enclosed area (shoelace) of well-formed polygons, 0 for the others.
        well_formed: bool [P], a list of an even count >= 6 of finite numbers (>= 3 [x, y] points).
        usable: bool [P], well-formed and enclosing an area (pycocotools makes a non-empty mask of it).
        first, end: int64 [A], the polygon indices ``first:end`` of each annotation's segmentation (by position in
            the annotation list; ``end == first`` for one without polygons).
        ranges: annotation id -> ``(first, end)``, or None when the table is looked up by position
            (``polygon_table(..., by_position=True)``: no dict of a million entries).
    """

    raw: list
    values: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray
    is_list: np.ndarray
    numeric: np.ndarray
    finite: np.ndarray
    area: np.ndarray
    well_formed: np.ndarray
    usable: np.ndarray
    first: np.ndarray
    end: np.ndarray
    ranges: dict | None
    _clean: bool = field(init=False, repr=False)  # every value a finite number: ``corrupt`` has nothing to find

    def __post_init__(self) -> None:
        object.__setattr__(self, '_clean', bool(self.numeric.all() and self.finite.all()))

    @cached_property
    def _usable(self) -> list:
        """The per-polygon lookups as Python lists (made on first use): per-annotation calls index them ~10x
        faster than numpy arrays."""
        return self.usable.tolist()

    @cached_property
    def _starts(self) -> list:
        return self.starts.tolist()

    @cached_property
    def _ends(self) -> list:
        return (self.starts + self.lengths).tolist()

    def _range(self, key: Hashable) -> tuple[int, int]:
        """``(first, end)`` polygon indices of an annotation (its id, or its position with ``ranges`` None)."""
        if self.ranges is not None:
            return self.ranges.get(key, (0, 0))
        return int(self.first[key]), int(self.end[key])

    def corrupt(self, ann_id: Hashable) -> str | None:
        """Why the annotation's polygons cannot be handed to pycocotools at all (a value that is not a finite
        number), or None. Checked for every annotation, also when masks are not loaded: such a file is broken."""
        if self._clean:
            return None
        first, end = self._range(ann_id)
        for k in range(first, end):
            if self.numeric[k] and self.finite[k]:
                continue
            if self.is_list[k] and not self.numeric[k]:
                bad = next((v for v in self.raw[k] if _not_a_number(v)), None)
                return (f'segmentation polygon {k - first} holds {bad!r}; expected numbers [x1, y1, x2, y2, ...]')
            if not self.finite[k]:
                seg = self.values[self.starts[k]:self.starts[k] + self.lengths[k]]
                j = int(np.flatnonzero(~np.isfinite(seg))[0])
                return (f'segmentation polygon {k - first} has the non-finite coordinate {float(seg[j])} at index '
                        f'{j}; expected finite numbers (pycocotools cannot rasterise NaN or inf)')
        return None

    def polygons(self, ann_id: Hashable) -> list[list[float]]:
        """The annotation's usable polygons as lists of floats (what the instance's ``mask`` holds)."""
        first, end = self._range(ann_id)
        return [self.values[self._starts[k]:self._ends[k]].tolist() for k in range(first, end) if self._usable[k]]

    def unusable(self, ann_id: Hashable) -> tuple[str, str] | None:
        """``(kind, why)`` when the annotation has polygons but none is usable, else None.

        The kind is that of its most nearly usable polygon: ``POLYGON_ZERO_AREA`` when one has >= 3 points,
        else ``POLYGON_FEW_POINTS`` when one is a list of an even count of numbers, else ``MALFORMED_MASK``
        (an odd count, or items that are not lists).
        """
        first, end = self._range(ann_id)
        if end == first or any(self._usable[first:end]):
            return None
        ks = range(first, end)
        formed = [k for k in ks if self.well_formed[k]]
        if formed:
            k = formed[0]
            return POLYGON_ZERO_AREA, (f'polygon {k - first} encloses zero area (points {_short(self.raw[k])}); '
                                       'expected at least 3 [x, y] points that enclose an area')
        even = [k for k in ks if self.is_list[k] and self.lengths[k] % 2 == 0]
        if even:
            k, n = even[0], int(self.lengths[even[0]])
            return POLYGON_FEW_POINTS, (f'polygon {k - first} has {n} number(s) ({n // 2} point(s)); expected at '
                                        'least 3 [x, y] points')
        k = first
        if self.is_list[k]:
            what = f'polygon 0 is {int(self.lengths[k])} numbers, an odd count'
        else:
            what = f'segmentation[0] is {self.raw[k]!r}, not a list (a polygon needs its own brackets)'
        return MALFORMED_MASK, f'{what}; expected polygons [[x1, y1, x2, y2, ...], ...] of [x, y] pairs'


def _short(values: list, limit: int = 12) -> str:
    """``values`` for a message, cut after ``limit`` items."""
    return repr(values) if len(values) <= limit else repr(values[:limit])[:-1] + f', ... ({len(values)} numbers)]'


def _not_a_number(value: object) -> bool:
    """Whether ``float`` refuses ``value`` (None, a list, a non-numeric string)."""
    try:
        float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return True
    return False


def _floats(polygons: Sequence[list], lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(values, numeric)``: the numbers of ``polygons`` one after the other as float64 (NaN in place of a
    polygon holding something ``float`` refuses) and bool [P] per polygon.

    One ``fromiter`` over the whole file; polygon by polygon only when that fails (a file holding None, nested
    lists or words). What the dataset keeps are these floats, never the json's values.
    """
    numeric = np.ones(len(polygons), dtype=bool)
    try:
        return np.fromiter(chain.from_iterable(polygons), np.float64, int(lengths.sum())), numeric
    except (TypeError, ValueError, OverflowError):
        pass
    parts = []
    for k, p in enumerate(polygons):
        try:
            parts.append(np.fromiter(p, np.float64, len(p)))
        except (TypeError, ValueError, OverflowError):
            numeric[k] = False
            parts.append(np.full(len(p), np.nan))
    return (np.concatenate(parts) if parts else np.zeros(0)), numeric


def _chunks(npts: np.ndarray) -> Iterable[tuple[int, int]]:
    """``(lo, hi)`` polygon index ranges holding about ``_CHUNK_POINTS`` points each (at least one polygon)."""
    ends = np.cumsum(npts)
    lo = 0
    while lo < len(npts):
        done = int(ends[lo - 1]) if lo else 0
        hi = max(int(np.searchsorted(ends, done + _CHUNK_POINTS, side='right')), lo + 1)
        yield lo, hi
        lo = hi


def _areas(values: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Shoelace area of each polygon ``values[starts[k]:starts[k] + lengths[k]]`` (x, y pairs, >= 3 points),
    computed for many polygons at once (chunks of ``_CHUNK_POINTS`` points bound the temporary arrays)."""
    npts = lengths // 2
    out = np.zeros(len(starts), dtype=np.float64)
    for lo, hi in _chunks(npts):
        n = npts[lo:hi]
        owner = np.repeat(np.arange(hi - lo), n)
        k = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)  # point index within its polygon
        k_next = np.where(k + 1 == np.repeat(n, n), 0, k + 1)
        base = np.repeat(starts[lo:hi], n)
        x, y = values[base + 2 * k], values[base + 2 * k + 1]
        xn, yn = values[base + 2 * k_next], values[base + 2 * k_next + 1]
        out[lo:hi] = 0.5 * np.abs(np.bincount(owner, weights=x * yn - xn * y, minlength=hi - lo))
    return out


def polygon_table(annotations: Sequence[dict], by_position: bool = False,
                  segmentations: Sequence | None = None) -> PolygonTable:
    """Read the polygons of every annotation whose ``segmentation`` is a non-empty list (ids already checked
    unique by ``check_ids``) into a ``PolygonTable``, looked up by annotation id or (``by_position``) by the
    annotation's position in ``annotations``. ``segmentations``: the annotations' ``segmentation`` values, when
    the caller has them already."""
    segs = list(map(dict.get, annotations, repeat('segmentation'))) if segmentations is None else segmentations
    is_seg_list = np.fromiter(map(isinstance, segs, repeat(list)), bool, len(segs))
    seg_lists = list(compress(segs, is_seg_list))
    counts = np.zeros(len(segs), np.int64)
    counts[is_seg_list] = np.fromiter(map(len, seg_lists), np.int64, len(seg_lists))
    end = np.cumsum(counts)
    first = end - counts
    raw: list = list(chain.from_iterable(seg_lists))
    ranges = None if by_position else {ann['id']: (int(first[k]), int(end[k]))
                                       for k, ann in enumerate(annotations) if counts[k]}
    is_list = np.fromiter(map(isinstance, raw, repeat(list)), bool, len(raw))
    lengths = np.zeros(len(raw), np.int64)
    lengths[is_list] = np.fromiter(map(len, compress(raw, is_list)), np.int64, int(is_list.sum()))
    values, numeric = _floats(list(compress(raw, is_list)), lengths[is_list])
    full_numeric = np.ones(len(raw), dtype=bool)
    full_numeric[is_list] = numeric
    starts = np.cumsum(lengths) - lengths
    finite = np.ones(len(raw), dtype=bool)
    nonempty = lengths > 0
    if nonempty.any():
        finite[nonempty] = np.logical_and.reduceat(np.isfinite(values), starts[nonempty])
    area = np.zeros(len(raw), dtype=np.float64)
    well_formed = is_list & full_numeric & finite & (lengths >= 6) & (lengths % 2 == 0)
    formed = np.flatnonzero(well_formed)
    if formed.size:
        area[formed] = _areas(values, starts[formed], lengths[formed])
    return PolygonTable(raw, values, starts, lengths, is_list, full_numeric, finite, area, well_formed,
                        well_formed & (area > MIN_POLYGON_AREA), first, end, ranges)


__all__ = ['MALFORMED_MASK', 'MIN_POLYGON_AREA', 'POLYGON_FEW_POINTS', 'POLYGON_ZERO_AREA', 'PolygonTable', 'check_ids',
           'polygon_table']
