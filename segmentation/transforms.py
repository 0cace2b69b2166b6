"""Segmentation-specific pipeline steps: load label maps, pack a sample for the model.

The generic transforms (LoadImageFromFile, Resize, RandomCrop, ...) live in ``oars.data`` and
are found through the registry's parent; importing them here makes sure they are registered.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import torch
from mmengine.structures import PixelData

import oars.data  # noqa: F401  (registers the core transforms)
from oars.data.transforms.loading import read_label_map
from oars.errors import DataError
from segmentation.registry import TRANSFORMS
from segmentation.structures import SegDataSample
from segmentation.transforms_parsing import GenerateEdge, RandomFlipParsing  # noqa: F401  (registers them)


def _present_values(seg: np.ndarray) -> np.ndarray:
    if seg.dtype == np.uint8:
        return np.flatnonzero(np.bincount(seg.ravel(), minlength=256))
    return np.unique(seg)


def check_label_values(values: np.ndarray, path: str, num_classes: int, ignore_index: int,
                       reduce_zero_label: bool) -> None:
    """Raise ValueError naming the file and the values outside the classes and ignore_index."""
    if reduce_zero_label:
        ok = (values >= 0) & (values <= num_classes) | (values == ignore_index)
        expected = (f'0 (background, becomes ignore with reduce_zero_label), 1..{num_classes} for the '
                    f'{num_classes} classes, or ignore_index {ignore_index}')
    else:
        ok = (values >= 0) & (values < num_classes) | (values == ignore_index)
        expected = f'class ids 0..{num_classes - 1} (num_classes={num_classes}) or ignore_index {ignore_index}'
    if not ok.all():
        bad = values[~ok]
        shown = ', '.join(str(int(v)) for v in bad[:20]) + (' ...' if len(bad) > 20 else '')
        raise DataError(f'{path}: label values [{shown}] are out of range; expected {expected}')


def check_label_size(seg: np.ndarray, path: str, results: dict) -> None:
    """Raise ``DataError`` naming both files and sizes when the label map is not the size of its image as read
    (``results['ori_shape']``, set by ``LoadImageFromFile``; no check without it). A mask of another size would
    be cropped and resized out of step with the image in training, and fail the metric after a whole
    validation epoch."""
    shape = results.get('ori_shape')
    if shape is None or tuple(seg.shape[:2]) == tuple(shape[:2]):
        return
    (lh, lw), (ih, iw) = seg.shape[:2], shape[:2]
    raise DataError(f'label map {path} is {lw}x{lh} (WxH) but its image {results.get("img_path", "?")} is '
                    f'{iw}x{ih}; expected a label map of the image\'s size, pixel for pixel (EXIF orientation is '
                    'applied to both)')


def reduce_zero(seg: np.ndarray, ignore_index: int) -> np.ndarray:
    """mmseg's reduce_zero_label: 0 -> ignore_index, k -> k - 1, ignore_index unchanged."""
    out = seg.astype(np.int64) - 1
    out[seg == 0] = ignore_index
    out[seg == ignore_index] = ignore_index
    return out


@TRANSFORMS.register_module()
class LoadSegAnnotations:
    """Load ``results['seg_map_path']`` into ``gt_seg_map`` (H×W class ids, uint8 when they fit).

    Reads with ``oars.data.transforms.loading.read_label_map`` (PIL, so that palette PNGs give indices; EXIF
    orientation applied as to the image). The map must have the size of the image as read (``ori_shape``).
    ``reduce_zero_label=None`` takes the dataset's value from ``results``. Values are checked
    against ``results['num_classes']`` and ``results['ignore_index']`` when the dataset gives them.
    """

    def __init__(self, reduce_zero_label: bool | None = None) -> None:
        self.reduce_zero_label = reduce_zero_label

    def __call__(self, results: dict) -> dict:
        path = results.get('seg_map_path')
        if not path:
            raise KeyError("LoadSegAnnotations needs results['seg_map_path']; was the dataset built without ann_dir?")
        path = os.fspath(path)
        seg = read_label_map(path)
        check_label_size(seg, path, results)
        reduce = results.get('reduce_zero_label', False) if self.reduce_zero_label is None else self.reduce_zero_label
        ignore_index = int(results.get('ignore_index', 255))
        values = _present_values(seg)
        if results.get('num_classes') is not None:
            check_label_values(values, path, int(results['num_classes']), ignore_index, reduce)
        if reduce:
            seg = reduce_zero(seg, ignore_index)
            values = _present_values(seg)
        fits = len(values) == 0 or (values.min() >= 0 and values.max() <= 255)
        results['gt_seg_map'] = seg.astype(np.uint8 if fits else np.int32, copy=False)
        results['reduce_zero_label'] = bool(reduce)
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}(reduce_zero_label={self.reduce_zero_label})'


def compact_labels(seg: np.ndarray) -> np.ndarray:
    """A contiguous label map in the narrowest of uint8 / int16 / int32 that holds its values
    (8x less shared memory than int64 for the usual 8-bit PNG labels)."""
    seg = np.asarray(seg)
    if seg.dtype.kind not in 'iub':
        raise DataError(f'gt_seg_map must hold integer class ids, got dtype {seg.dtype}')
    if seg.dtype in (np.uint8, np.int16, np.int32):
        return np.ascontiguousarray(seg)
    lo, hi = (int(seg.min()), int(seg.max())) if seg.size else (0, 0)
    for dtype in (np.uint8, np.int16, np.int32):
        info = np.iinfo(dtype)
        if info.min <= lo and hi <= info.max:
            return np.ascontiguousarray(seg.astype(dtype))
    raise DataError(f'gt_seg_map values {lo}..{hi} do not fit in int32')


@TRANSFORMS.register_module()
class PackSegInputs:
    """Turn the results dict into ``{'inputs': [C, H, W] tensor, 'data_samples': SegDataSample}``.

    ``inputs`` keeps the image's dtype (uint8 BGR unless Normalize ran); ``gt_sem_seg`` is a
    [1, H, W] map when a label map was loaded (``gt_edge_map`` likewise when ``GenerateEdge`` ran), kept
    narrow (uint8 for 8-bit labels, else int16/int32)
    because it crosses the workers' shared memory; the model and metric widen it on the device.
    ``meta_keys`` present in results become metainfo.
    """

    def __init__(
        self,
        meta_keys: Sequence[str] = ('img_path', 'seg_map_path', 'ori_shape', 'img_shape', 'pad_shape', 'flip',
                                    'reduce_zero_label'),
    ) -> None:
        self.meta_keys = tuple(meta_keys)

    def __call__(self, results: dict) -> dict:
        if results.get('img') is None:
            raise KeyError("PackSegInputs needs results['img']; put LoadImageFromFile first")
        img = results['img']
        if img.ndim == 2:
            img = img[..., None]
        inputs = torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1)))
        sample = SegDataSample()
        if results.get('gt_seg_map') is not None:
            sample.gt_sem_seg = PixelData(data=torch.from_numpy(compact_labels(results['gt_seg_map'])[None]))
        if results.get('gt_edge_map') is not None:  # edge targets of GenerateEdge (transforms_parsing.py)
            sample.gt_edge_map = PixelData(data=torch.from_numpy(compact_labels(results['gt_edge_map'])[None]))
        sample.set_metainfo({k: results[k] for k in self.meta_keys if k in results})
        return {'inputs': inputs, 'data_samples': sample}

    def __repr__(self) -> str:
        return f'{type(self).__name__}(meta_keys={self.meta_keys})'
