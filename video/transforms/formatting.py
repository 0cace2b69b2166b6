"""Lay a clip out for the recognizers and pack samples into what their data preprocessor takes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from oars.errors import DataError
from video.registry import TRANSFORMS
from video.structures import ActionDataSample
from video.transforms.frames import get_clip

INPUT_FORMATS = ('NCHW', 'NCTHW')

DEFAULT_META_KEYS = ('filename', 'frame_dir', 'frame_inds', 'num_clips', 'clip_len', 'frame_interval', 'num_crops',
                     'img_shape', 'original_shape', 'total_frames', 'multi_label', 'flip')
FEATURE_META_KEYS = ('filename', 'num_frames', 'total_frames', 'feature_inds', 'multi_label')


def _where(results: dict) -> str:
    return str(results.get('filename') or results.get('frame_dir') or 'a sample')


def _count(results: dict, key: str) -> int:
    value = results.get(key, 1)
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
        raise DataError(f'{_where(results)}: FormatShape needs {key} to be a positive int, got {value!r}')
    return int(value)


@TRANSFORMS.register_module()
class FormatShape:
    """``imgs`` [V * T frames, H, W, 3] -> one uint8 array in the recognizer's layout.

    V = ``num_crops * num_clips`` views (crops outermost, as the crops write them), T = ``clip_len``:

    - ``NCHW`` (2D recognizers, TSN/TSM): [V * T, 3, H, W];
    - ``NCTHW`` (3D recognizers): [V, 3, T, H, W].

    Channels stay BGR and uint8 (the data preprocessor converts and normalises on the device). Writes ``imgs``
    (C-contiguous), ``input_shape`` and ``num_crops`` (1 when no crop set it).
    """

    def __init__(self, input_format: str = 'NCHW') -> None:
        if input_format not in INPUT_FORMATS:
            raise DataError(f'FormatShape.input_format must be one of {INPUT_FORMATS}, got {input_format!r}')
        self.input_format = input_format

    def __call__(self, results: dict) -> dict:
        clip = get_clip(results, 'FormatShape')
        num_crops = _count(results, 'num_crops')
        num_clips = _count(results, 'num_clips')
        clip_len = _count(results, 'clip_len')
        views = num_crops * num_clips
        if len(clip) != views * clip_len:
            raise DataError(f'{_where(results)}: FormatShape got {len(clip)} frames, expected num_crops x num_clips '
                            f'x clip_len = {num_crops} x {num_clips} x {clip_len} = {views * clip_len}')
        if self.input_format == 'NCHW':
            out = clip.transpose(0, 3, 1, 2)
        else:
            n, h, w, c = clip.shape
            out = clip.reshape(views, clip_len, h, w, c).transpose(0, 4, 1, 2, 3)
        results['imgs'] = np.ascontiguousarray(out)
        results['input_shape'] = tuple(int(s) for s in out.shape)
        results['img_shape'] = (int(clip.shape[1]), int(clip.shape[2]))
        results['num_crops'] = num_crops
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}(input_format={self.input_format!r})'


def _data_sample(results: dict, meta_keys: Sequence[str]) -> ActionDataSample:
    sample = ActionDataSample()
    label = results.get('label')
    if label is not None:
        multi = bool(results.get('multi_label', False))
        num_classes = results.get('num_classes')
        ids = np.asarray(label).reshape(-1)
        if not multi and ids.size != 1:
            raise DataError(f'{_where(results)}: label {label!r} has {ids.size} class ids but multi_label is false')
        if multi and num_classes is None:
            raise DataError(f'{_where(results)}: a multi_label sample needs num_classes for its multi-hot gt_label')
        if num_classes is not None and ((ids < 0).any() or (ids >= num_classes).any()):
            raise DataError(f'{_where(results)}: label {label!r} has a class id outside [0, {num_classes - 1}]')
        sample.set_gt_label(label, num_classes=num_classes, multi_label=multi)
    sample.set_metainfo({k: results[k] for k in meta_keys if k in results})
    return sample


@TRANSFORMS.register_module()
class PackActionInputs:
    """Results -> ``{'inputs': uint8 tensor, 'data_samples': ActionDataSample}``.

    ``inputs`` is FormatShape's array as a torch.uint8 tensor ([V * T, 3, H, W] or [V, 3, T, H, W]; no copy).
    ``gt_label`` comes from ``label``: LongTensor [1], or multi-hot FloatTensor [num_classes] when
    ``multi_label``; no label (inference) -> no gt_label. ``meta_keys`` present in results become metainfo.
    """

    def __init__(self, meta_keys: Sequence[str] = DEFAULT_META_KEYS) -> None:
        self.meta_keys = tuple(meta_keys)

    def __call__(self, results: dict) -> dict:
        imgs = results.get('imgs')
        if not isinstance(imgs, np.ndarray) or imgs.ndim not in (4, 5) or imgs.shape[1] != 3:
            got = type(imgs).__name__ if not isinstance(imgs, np.ndarray) else f'shape {tuple(imgs.shape)}'
            raise DataError(f'{_where(results)}: PackActionInputs needs imgs from FormatShape ([V*T, 3, H, W] or '
                            f'[V, 3, T, H, W]), got {got}; put FormatShape before it')
        if imgs.dtype != np.uint8:
            raise DataError(f'{_where(results)}: PackActionInputs needs uint8 imgs, got {imgs.dtype}')
        inputs = torch.from_numpy(np.ascontiguousarray(imgs))
        return {'inputs': inputs, 'data_samples': _data_sample(results, self.meta_keys)}

    def __repr__(self) -> str:
        return f'{type(self).__name__}(meta_keys={self.meta_keys})'


@TRANSFORMS.register_module()
class PackFeatureInputs:
    """Results -> ``{'inputs': {modality: float32 tensor [T, D]}, 'data_samples': ActionDataSample}``.

    ``features`` (modality -> float32 [T, D], already at most ``max_frames`` long from LoadFeatures) must share
    T; ``num_frames`` (the valid length, default T) goes to metainfo, where the data preprocessor builds the
    [B, T] mask from it. ``modalities`` (default: all, sorted) picks and orders them. Labels as PackActionInputs.
    """

    def __init__(self, modalities: Sequence[str] | None = None, meta_keys: Sequence[str] = FEATURE_META_KEYS) -> None:
        if modalities is not None and (isinstance(modalities, str) or len(modalities) == 0):
            raise DataError(f'PackFeatureInputs.modalities must be a non-empty list of names, got {modalities!r}')
        self.modalities = None if modalities is None else tuple(modalities)
        self.meta_keys = tuple(meta_keys)

    def __call__(self, results: dict) -> dict:
        feats = results.get('features')
        if not isinstance(feats, dict) or not feats:
            raise DataError(f'{_where(results)}: PackFeatureInputs needs features (modality -> [T, D] array); put '
                            'LoadFeatures before it')
        names = sorted(feats) if self.modalities is None else self.modalities
        missing = [m for m in names if m not in feats]
        if missing:
            raise DataError(f'{_where(results)}: PackFeatureInputs.modalities {missing} not in the features '
                            f'(has {sorted(feats)})')
        arrays = {m: np.asarray(feats[m], dtype=np.float32) for m in names}
        lengths = {m: a.shape[0] for m, a in arrays.items() if a.ndim == 2}
        if len(lengths) != len(arrays) or len(set(lengths.values())) != 1:
            shapes = {m: tuple(a.shape) for m, a in arrays.items()}
            raise DataError(f'{_where(results)}: PackFeatureInputs needs every modality as [T, D] with one T, got '
                            f'{shapes}')
        length = next(iter(lengths.values()))
        num_frames = results.get('num_frames', length)
        if not isinstance(num_frames, (int, np.integer)) or not 0 < num_frames <= length:
            raise DataError(f'{_where(results)}: num_frames must be an int in [1, {length}] (the features\' T), '
                            f'got {num_frames!r}')
        results['num_frames'] = int(num_frames)
        inputs = {m: torch.from_numpy(np.ascontiguousarray(a)) for m, a in arrays.items()}
        return {'inputs': inputs, 'data_samples': _data_sample(results, self.meta_keys)}

    def __repr__(self) -> str:
        return f'{type(self).__name__}(modalities={self.modalities}, meta_keys={self.meta_keys})'
