"""A COCO instances file as flat arrays: what ``CocoDataset`` keeps of a file of a million boxes.

Why arrays: one Python dict per annotation (with a list per box and per polygon) costs ~0.5 kB, more than the json's
own objects, and every DataLoader worker touching those objects copies their memory pages (reference counts are
written on every access). Here the kept instances of all images are rows of a few numpy arrays (boxes, labels, ignore
flags, annotation ids; polygon coordinates as one float64 array with offsets; RLE dicts pickled into one byte buffer),
sorted by image, and each image's record holds only its ``(start, end)`` rows: workers share the arrays' pages, and an
image's ``instances`` list of dicts (what the transforms read) is made only when the sample is asked for
(``instances``). The json's own objects are dropped once the arrays are built.
"""

from __future__ import annotations

import pickle
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from detection.datasets.annotation_checks import as_box

MASK_NONE, MASK_POLYGONS, MASK_PACKED = 0, 1, 2  # what an instance's ``mask`` is made of (``mask_kind``)


def pack_objects(objects: Sequence[object]) -> tuple[np.ndarray, np.ndarray]:
    """``(bytes uint8 [B], ends int64 [N])``: each object pickled, one after the other (mmengine's
    ``serialize_data`` layout), so that N objects are one array shared by workers rather than N Python objects."""
    blobs = [np.frombuffer(pickle.dumps(o, protocol=4), dtype=np.uint8) for o in objects]
    ends = np.cumsum([len(b) for b in blobs], dtype=np.int64) if blobs else np.zeros(0, np.int64)
    return (np.concatenate(blobs) if blobs else np.zeros(0, np.uint8)), ends


def unpack_object(data: np.ndarray, ends: np.ndarray, k: int) -> object:
    """Object ``k`` of ``pack_objects``' arrays (a fresh copy)."""
    start = int(ends[k - 1]) if k else 0
    return pickle.loads(memoryview(data[start:int(ends[k])]))


def id_array(ids: Sequence[Hashable]) -> np.ndarray:
    """COCO ids as int64 when they are all ints (the usual case), else as an object array (strings, floats)."""
    if set(map(type, ids)) == {int}:
        try:
            return np.fromiter(ids, np.int64, len(ids))
        except OverflowError:
            pass
    out = np.empty(len(ids), dtype=object)
    out[:] = list(ids)
    return out


def box_array(values: Sequence[object]) -> tuple[np.ndarray, np.ndarray]:
    """``(xywh float64 [A, 4], ok bool [A])`` of the ``bbox`` values of A annotations: ``ok`` where
    ``annotation_checks.as_box`` takes the value (4 finite numbers), and then its numbers.

    One ``np.array`` for a well-formed file; value by value (``as_box``, the one rule) only for rows that are not
    finite or when the file holds something else than lists of 4 numbers."""
    n = len(values)
    boxes = np.zeros((n, 4), dtype=np.float64)
    ok = np.zeros(n, dtype=bool)
    fast = None
    if n:
        try:
            fast = np.array(values, dtype=np.float64)
        except (TypeError, ValueError, OverflowError):
            fast = None
    if fast is not None and fast.shape == (n, 4):
        boxes[:] = fast
        ok[:] = np.isfinite(fast).all(axis=1)
        check = np.flatnonzero(~ok)
    else:
        check = range(n)
    for k in check:
        box = as_box(values[k])
        if box is not None:
            boxes[k], ok[k] = box, True
    return boxes, ok


@dataclass
class CocoIndex:
    """The kept instances of a COCO file, image by image (rows ``start:end`` of every per-instance array).

    Attributes:
        boxes: float64 [N, 4], xyxy clipped to the image.
        labels: int64 [N], class index (position in ``classes``); ``ignore``: int8 [N], 1 for a crowd instance.
        ann_ids: [N] the annotations' ids (int64, or object for string ids).
        mask_kind: int8 [N], ``MASK_NONE`` (no ``mask`` key), ``MASK_POLYGONS`` (a list of polygons, possibly
            empty) or ``MASK_PACKED`` (an RLE dict, in ``packed``); ``mask_ref``: int64 [N], the instance's row in
            ``poly_ends`` or ``packed_ends``.
        poly_ends: int64 [M], end of each polygon instance's polygons in ``pv_start``/``pv_len`` (cumulative).
        pv_start, pv_len: int64 [P], each kept polygon's numbers in ``values`` (float64 [V]).
        packed, packed_ends: RLE dicts, ``pack_objects``' arrays.
    """

    boxes: np.ndarray
    labels: np.ndarray
    ignore: np.ndarray
    ann_ids: np.ndarray
    mask_kind: np.ndarray
    mask_ref: np.ndarray
    poly_ends: np.ndarray
    pv_start: np.ndarray
    pv_len: np.ndarray
    values: np.ndarray
    packed: np.ndarray
    packed_ends: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)

    def _polygons(self, ref: int) -> list[list[float]]:
        first = int(self.poly_ends[ref - 1]) if ref else 0
        return [self.values[s:s + n].tolist()
                for s, n in zip(self.pv_start[first:int(self.poly_ends[ref])].tolist(),
                                self.pv_len[first:int(self.poly_ends[ref])].tolist())]

    def instances(self, start: int, end: int) -> list[dict]:
        """The instance dicts of rows ``start:end`` (``bbox``, ``bbox_label``, ``ignore_flag``, ``ann_id`` and,
        when the annotation has a segmentation, ``mask``), as ``LoadAnnotations`` reads them."""
        rows = slice(start, end)
        out = []
        for box, label, ignore, ann_id, kind, ref in zip(
                self.boxes[rows].tolist(), self.labels[rows].tolist(), self.ignore[rows].tolist(),
                self.ann_ids[rows].tolist(), self.mask_kind[rows].tolist(), self.mask_ref[rows].tolist()):
            inst = {'bbox': box, 'bbox_label': label, 'ignore_flag': ignore, 'ann_id': ann_id}
            if kind == MASK_POLYGONS:
                inst['mask'] = self._polygons(ref)
            elif kind == MASK_PACKED:
                inst['mask'] = unpack_object(self.packed, self.packed_ends, ref)
            out.append(inst)
        return out

    def usable_images(self, spans: np.ndarray) -> np.ndarray:
        """bool [I]: whether each ``(start, end)`` row of ``spans`` (int64 [I, 2]) holds a non-ignored instance."""
        counts = np.concatenate([[0], np.cumsum(self.ignore == 0)])
        return counts[spans[:, 1]] > counts[spans[:, 0]] if len(spans) else np.zeros(0, dtype=bool)

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays (what the index costs, shared by workers)."""
        return sum(getattr(self, f).nbytes for f in self.__dataclass_fields__)


__all__ = ['MASK_NONE', 'MASK_PACKED', 'MASK_POLYGONS', 'CocoIndex', 'box_array', 'id_array', 'pack_objects',
           'unpack_object']
