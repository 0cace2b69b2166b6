"""Photometric transforms: mmseg's PhotoMetricDistortion on albumentations, and Normalize."""

from __future__ import annotations

from collections.abc import Sequence

import albumentations as A
import numpy as np

from oars.data.transforms.albu import AlbuAdapter
from oars.errors import DataError
from oars.registry import TRANSFORMS


def _range(value: Sequence[float], name: str) -> tuple[float, float]:
    if len(value) != 2 or not 0 <= value[0] <= value[1]:
        raise DataError(f'PhotoMetricDistortion.{name} must be (low, high) with 0 <= low <= high, got {value!r}')
    return float(value[0]), float(value[1])


@TRANSFORMS.register_module()
class PhotoMetricDistortion(AlbuAdapter):
    """mmseg's photometric distortion: each step with probability 0.5, in this order —
    brightness (add ``U(-brightness_delta, brightness_delta)``), then contrast (multiply by
    ``U(contrast_range)``) either first or last around saturation (``U(saturation_range)``) and
    hue (shift by ``U(-hue_delta, hue_delta)`` on OpenCV's 0–180 hue scale).

    Runs on albumentations (RandomBrightnessContrast, ColorJitter) with the image swapped to RGB,
    which albumentations' colour operations assume. Saturation blends with the grey image
    (torchvision semantics) rather than scaling the HSV S channel. Needs a uint8 image.
    """

    bgr_to_rgb = True

    def __init__(
        self,
        brightness_delta: int = 32,
        contrast_range: Sequence[float] = (0.5, 1.5),
        saturation_range: Sequence[float] = (0.5, 1.5),
        hue_delta: int = 18,
    ) -> None:
        if not 0 <= brightness_delta <= 255:
            raise DataError(f'PhotoMetricDistortion.brightness_delta must be in [0, 255], got {brightness_delta!r}')
        if not 0 <= hue_delta <= 90:
            raise DataError(f'PhotoMetricDistortion.hue_delta must be in [0, 90], got {hue_delta!r}')
        self.brightness_delta = brightness_delta
        self.contrast_range = _range(contrast_range, 'contrast_range')
        self.saturation_range = _range(saturation_range, 'saturation_range')
        self.hue_delta = hue_delta

    def _contrast(self) -> A.BasicTransform:
        lo, hi = self.contrast_range
        return A.RandomBrightnessContrast(brightness_limit=(0.0, 0.0), contrast_limit=(lo - 1.0, hi - 1.0), p=0.5)

    def _saturation(self) -> A.BasicTransform:
        return A.ColorJitter(brightness=(1.0, 1.0), contrast=(1.0, 1.0), saturation=self.saturation_range,
                             hue=(0.0, 0.0), p=0.5)

    def _hue(self) -> A.BasicTransform:
        h = self.hue_delta / 180.0
        return A.ColorJitter(brightness=(1.0, 1.0), contrast=(1.0, 1.0), saturation=(1.0, 1.0), hue=(-h, h), p=0.5)

    def _albu_transforms(self) -> list[A.BasicTransform | A.BaseCompose]:
        b = self.brightness_delta / 255.0
        brightness = A.RandomBrightnessContrast(brightness_limit=(-b, b), contrast_limit=(0.0, 0.0),
                                                brightness_by_max=True, p=0.5)
        contrast_first = A.Sequential([self._contrast(), self._saturation(), self._hue()], p=1.0)
        contrast_last = A.Sequential([self._saturation(), self._hue(), self._contrast()], p=1.0)
        return [brightness, A.OneOf([contrast_first, contrast_last], p=1.0)]

    def __call__(self, results: dict) -> dict:
        img = results.get('img')
        if img is not None and img.dtype != np.uint8:
            raise TypeError(f'PhotoMetricDistortion needs a uint8 image, got {img.dtype}; put it before Normalize')
        return self._apply(results)

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(brightness_delta={self.brightness_delta}, '
                f'contrast_range={self.contrast_range}, saturation_range={self.saturation_range}, '
                f'hue_delta={self.hue_delta})')


@TRANSFORMS.register_module()
class Normalize:
    """``(img - mean) / std`` in float32, after BGR->RGB when ``to_rgb``.

    Usually the model's data preprocessor normalises on the device instead; use this only for
    pipelines that must hand out normalised arrays.
    """

    def __init__(self, mean: Sequence[float], std: Sequence[float], to_rgb: bool = True) -> None:
        self.mean = np.asarray(mean, dtype=np.float32).reshape(-1)
        self.std = np.asarray(std, dtype=np.float32).reshape(-1)
        if self.mean.shape != self.std.shape:
            raise DataError(f'Normalize: mean {list(mean)} and std {list(std)} must have the same length')
        if (self.std == 0).any():
            raise DataError(f'Normalize: std must not contain 0, got {list(std)}')
        self.to_rgb = to_rgb

    def __call__(self, results: dict) -> dict:
        img = results['img']
        channels = 1 if img.ndim == 2 else img.shape[2]
        if len(self.mean) not in (1, channels):
            raise DataError(f'Normalize: mean/std have {len(self.mean)} values but the image has {channels} channels')
        img = img.astype(np.float32)
        if self.to_rgb and channels == 3:
            img = img[..., ::-1]
        results['img'] = np.ascontiguousarray((img - self.mean) / self.std, dtype=np.float32)
        results['img_norm_cfg'] = dict(mean=self.mean.tolist(), std=self.std.tolist(), to_rgb=self.to_rgb)
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}(mean={self.mean.tolist()}, std={self.std.tolist()}, to_rgb={self.to_rgb})'
