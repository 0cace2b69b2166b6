"""COCO instance segmentations (polygons, RLE) -> uint8 bitmaps, decoded by pycocotools in as few calls as it allows.

What an instance's ``mask`` may hold (``detection.datasets.coco.segmentation_mask`` writes it):

- a list of polygons ``[[x1, y1, x2, y2, ...], ...]`` in pixel-corner coordinates (COCO's): rasterised by
  ``pycocotools.mask.frPyObjects``; several polygons of one instance are merged (their union);
- an uncompressed RLE ``{'counts': [int, ...], 'size': [h, w]}`` (COCO crowd regions) or a compressed one
  ``{'counts': str, 'size': [h, w]}``.

An instance whose polygons are all malformed (``[]``) or whose ``mask`` is a dict without ``counts``/``size``
gets an all-zero mask and becomes ignored, as MMDetection's ``LoadAnnotations`` does; an instance without a
``mask`` key is an error (a box-only data set used for a mask model).
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np
from pycocotools import mask as mask_utils

from oars.errors import DataError


def _where(path: str, index: int, inst: dict) -> str:
    ann = f"annotation id {inst['ann_id']}" if inst.get('ann_id') is not None else f'instance {index}'
    return f'{path}: {ann} (bbox {inst.get("bbox")})'


def _usable_polygons(mask: list) -> list[list[float]]:
    return [p for p in mask if isinstance(p, list | tuple | np.ndarray) and len(p) >= 6 and len(p) % 2 == 0]


def decode_instance_masks(instances: Sequence[dict], height: int, width: int,
                          path: str = 'a sample') -> tuple[np.ndarray, np.ndarray]:
    """Bitmaps of the instances' ``mask`` fields.

    Args:
        instances: the data info's instances; each needs ``mask`` (see the module docstring).
        height, width: the image's size as read; RLE sizes must equal it.
        path: the image, named in errors.

    Returns:
        ``(masks, unusable)``: uint8 [N, height, width] 0/1 bitmaps aligned with ``instances``, and bool [N]
        marking the instances without a usable mask (all-zero; the caller makes them ignored).

    Raises:
        DataError: an instance has no ``mask``, an RLE's size is not (height, width), its counts do not cover
            the image, or pycocotools rejects it; the message names the image and the annotation.

    All polygons of the image go to one ``frPyObjects`` call, all uncompressed RLEs to another; the polygons of
    an instance are merged (one ``merge`` call per multi-polygon instance) and every mask is decoded by one
    ``decode`` call.
    """
    n = len(instances)
    h, w = int(height), int(width)
    unusable = np.zeros(n, dtype=bool)
    polys: list[list[float]] = []
    poly_owner: list[int] = []
    uncompressed: list[dict] = []
    uncompressed_owner: list[int] = []
    rles: dict[int, dict] = {}
    for i, inst in enumerate(instances):
        if 'mask' not in inst:
            raise DataError(f'{_where(path, i, inst)} has no segmentation mask, but LoadAnnotations(with_mask=True) '
                            'needs one per instance: give every annotation a segmentation (polygons or RLE), or '
                            'load boxes only (with_mask: false)')
        mask = inst['mask']
        if isinstance(mask, list | tuple):
            usable = _usable_polygons(list(mask))
            polys += [[float(v) for v in p] for p in usable]
            poly_owner += [i] * len(usable)
            unusable[i] = not usable
        elif isinstance(mask, dict) and mask.get('counts') is not None and mask.get('size') is not None:
            size = tuple(int(v) for v in np.asarray(mask['size']).reshape(-1))
            if size != (h, w):
                raise DataError(f"{_where(path, i, inst)}: RLE 'size' [height, width] = {list(size)} but the image "
                                f'is {w}x{h} (WxH); expected [{h}, {w}]')
            if isinstance(mask['counts'], list | tuple | np.ndarray):
                counts = [int(v) for v in mask['counts']]
                if sum(counts) != h * w or min(counts, default=0) < 0:
                    raise DataError(f"{_where(path, i, inst)}: uncompressed RLE 'counts' cover {sum(counts)} pixels; "
                                    f'expected non-negative runs summing to height * width = {h * w}')
                uncompressed.append({'counts': counts, 'size': [h, w]})
                uncompressed_owner.append(i)
            else:
                rles[i] = {'counts': mask['counts'], 'size': [h, w]}
        else:
            unusable[i] = True
    try:
        if uncompressed:
            rles.update(zip(uncompressed_owner, mask_utils.frPyObjects(uncompressed, h, w)))
    except (ValueError, TypeError) as err:
        raise DataError(f'{path}: an uncompressed RLE of annotations '
                        f'{[instances[i].get("ann_id", i) for i in uncompressed_owner]} is invalid ({err})') from None
    if polys:
        owners = np.asarray(poly_owner)
        poly_rles = mask_utils.frPyObjects(polys, h, w)
        starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])
        ends = np.r_[starts[1:], len(owners)]
        for s, e in zip(starts.tolist(), ends.tolist()):
            rles[int(owners[s])] = poly_rles[s] if e - s == 1 else mask_utils.merge(poly_rles[s:e])
    masks = np.zeros((n, h, w), dtype=np.uint8)
    if rles:
        order = sorted(rles)
        try:
            decoded = mask_utils.decode([rles[i] for i in order])  # [h, w, K] Fortran order
        except (ValueError, TypeError) as err:
            bad = [_where(path, i, instances[i]) for i in order if not _decodes(rles[i])]
            raise DataError(f'{"; ".join(bad) or path}: pycocotools cannot decode the RLE ({err}); expected counts '
                            f'covering the {w}x{h} image') from None
        # decode's Fortran [h, w, K] is a C-contiguous [K, w, h]: one cv2.transpose per mask into the output
        # (4x faster than numpy's strided copy of the transposed view)
        by_mask = decoded.T
        for k, i in enumerate(order):
            cv2.transpose(by_mask[k], dst=masks[i])
    return masks, unusable


def _decodes(rle: dict) -> bool:
    """Whether pycocotools decodes this one RLE (only called to name the bad ones after a failed batch)."""
    try:
        mask_utils.decode([rle])
    except (ValueError, TypeError):
        return False
    return True
