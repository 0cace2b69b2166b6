"""PaddleSeg/mmseg geometric augmentations on albumentations: padding crop, aspect jitter, rotation, affine, and
the PaddleSeg names of the flips.

Pixels that a step brings in from outside the image (padding, rotated-in corners) get ``pad_val`` in the image
and the ignore index in the label map: ``seg_pad_val`` when given, else the dataset's ``results['ignore_index']``
(segmentation datasets put it in every sample), else 255 — so the loss and the metric skip them. Instance masks
(``gt_masks``) get 0 there. Image, label map, instance masks and boxes move together (albumentations' Compose, or
its functional ops for sample-dependent windows, through :class:`~oars.data.transforms.albu.AlbuAdapter`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import albumentations as A
import cv2
import numpy as np
from albumentations.augmentations.crops import functional as fcrops
from albumentations.augmentations.geometric import functional as fgeometric

from oars.data.transforms.albu import (
    BOX_KEY,
    IMG_INTERP,
    MASK_INTERP,
    AlbuAdapter,
    apply_pixel_fns,
    build_compose,
    run_albu,
)
from oars.data.transforms.arg_checks import check_pad_val, check_prob, check_range, check_seg_pad_val
from oars.data.transforms.geometric import RandomCrop, RandomFlip, place_masks, resize_masks, to_pair
from oars.errors import DataError
from oars.registry import TRANSFORMS

DEFAULT_SEG_PAD_VAL = 255
MAX_ASPECT_TRIES = 10


class FillAdapter(AlbuAdapter):
    """An AlbuAdapter whose albumentations transforms fill the label map with the sample's ignore index.

    Subclasses set ``pad_val`` / ``seg_pad_val`` and implement ``_fill_transforms(seg_fill)``; the Compose is
    cached per (with boxes, label fill), so a dataset's one ignore_index costs one build.
    """

    pad_val: float | tuple[float, ...] = 0.0
    seg_pad_val: int | None = None

    def seg_fill(self, results: dict) -> int:
        """The label value for pixels from outside the image: ``seg_pad_val``, else ``results['ignore_index']``,
        else 255."""
        if self.seg_pad_val is not None:
            return self.seg_pad_val
        return int(results.get('ignore_index', DEFAULT_SEG_PAD_VAL))

    def _fill_transforms(self, seg_fill: int) -> list[A.BasicTransform]:
        raise NotImplementedError

    def _apply_filled(self, results: dict, masks_fn=None) -> dict:
        key = (results.get(BOX_KEY) is not None, self.seg_fill(results))
        cache = self.__dict__.setdefault('_fill_compose_cache', {})
        if key not in cache:
            cache[key] = build_compose(self._fill_transforms(key[1]), key[0])
        return run_albu(results, cache[key], bgr_to_rgb=self.bgr_to_rgb, masks_fn=masks_fn)


@TRANSFORMS.register_module()
class RandomPaddingCrop(FillAdapter):
    """PaddleSeg's ``RandomPaddingCrop``: crop a random ``crop_size`` (W, H — PaddleSeg's order; mmseg's
    ``RandomCrop`` takes (H, W)) window; an image smaller than it is first padded at the bottom/right with
    ``pad_val`` (label: ``seg_pad_val`` / the sample's ignore_index), so every output is exactly ``crop_size``.

    ``cat_max_ratio`` < 1 redraws the window as mmseg's RandomCrop (PaddleSeg's ``category_max_ratio``), not
    counting ignored pixels. (The existing ``RandomCrop`` does not pad: a smaller image keeps its size.)
    """

    def __init__(self, crop_size: int | Sequence[int] = (512, 512), pad_val: float | Sequence[float] = 0,
                 seg_pad_val: int | None = None, cat_max_ratio: float = 1.0) -> None:
        self.crop_size = to_pair(crop_size, 'RandomPaddingCrop.crop_size', '(W, H)')
        self.pad_val = check_pad_val('RandomPaddingCrop', pad_val)
        self.seg_pad_val = check_seg_pad_val('RandomPaddingCrop', seg_pad_val)
        if isinstance(cat_max_ratio, bool) or not isinstance(cat_max_ratio, (int, float)) or not 0 < cat_max_ratio <= 1:
            raise DataError(f'RandomPaddingCrop.cat_max_ratio must be in (0, 1], got {cat_max_ratio!r}')
        w, h = self.crop_size
        self._crop = RandomCrop((h, w), cat_max_ratio=float(cat_max_ratio))

    def _fill_transforms(self, seg_fill: int) -> list[A.BasicTransform]:
        w, h = self.crop_size
        return [A.PadIfNeeded(min_height=h, min_width=w, position='top_left', border_mode=cv2.BORDER_CONSTANT,
                              fill=self.pad_val, fill_mask=seg_fill)]

    def __call__(self, results: dict) -> dict:
        h, w = results['img'].shape[:2]
        if h < self.crop_size[1] or w < self.crop_size[0]:
            results = self._apply_filled(results, masks_fn=place_masks)
        self._crop.ignore_index = self.seg_fill(results)  # padded pixels do not count for cat_max_ratio
        return self._crop(results)

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(crop_size={self.crop_size}, pad_val={self.pad_val}, '
                f'seg_pad_val={self.seg_pad_val}, cat_max_ratio={self._crop.cat_max_ratio})')


@TRANSFORMS.register_module()
class RandomScaleAspect(AlbuAdapter):
    """PaddleSeg's ``RandomScaleAspect`` (aspect-ratio jitter crop): crop a window of area
    ``U(min_scale, 1) * H * W`` and aspect ratio ``U(aspect_ratio, 1 / aspect_ratio)`` (width and height swapped
    with probability 0.5) at a random place, then resize it back to the image's (H, W). Up to 10 draws; when none
    fits inside the image, the sample is left unchanged.
    """

    def __init__(self, min_scale: float = 0.5, aspect_ratio: float = 0.33) -> None:
        if isinstance(min_scale, bool) or not isinstance(min_scale, (int, float)) or not 0 < min_scale <= 1:
            raise DataError(f'RandomScaleAspect.min_scale must be in (0, 1], got {min_scale!r}')
        if isinstance(aspect_ratio, bool) or not isinstance(aspect_ratio, (int, float)) or not 0 < aspect_ratio <= 1:
            raise DataError(f'RandomScaleAspect.aspect_ratio must be in (0, 1], got {aspect_ratio!r}')
        self.min_scale = float(min_scale)
        self.aspect_ratio = float(aspect_ratio)

    def _window(self, h: int, w: int) -> tuple[int, int, int, int] | None:
        """(y1, x1, dh, dw) of a window strictly smaller than the image, or None after the tries."""
        for _ in range(MAX_ASPECT_TRIES):
            area = h * w * np.random.uniform(self.min_scale, 1.0)
            aspect = np.random.uniform(self.aspect_ratio, 1.0 / self.aspect_ratio)
            dw, dh = int(math.sqrt(area * aspect)), int(math.sqrt(area / aspect))
            if np.random.random_sample() < 0.5:
                dw, dh = dh, dw
            if 0 < dh < h and 0 < dw < w:
                return np.random.randint(0, h - dh + 1), np.random.randint(0, w - dw + 1), dh, dw
        return None

    def __call__(self, results: dict) -> dict:
        h, w = results['img'].shape[:2]
        window = self._window(h, w)
        if window is None:
            results['img_shape'] = (h, w)
            return results
        y1, x1, dh, dw = window
        box = dict(x_min=x1, y_min=y1, x_max=x1 + dw, y_max=y1 + dh)

        def crop_masks(masks: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
            return resize_masks(np.ascontiguousarray(masks[:, y1:y1 + dh, x1:x1 + dw]), shape)

        if results.get(BOX_KEY) is not None:
            return self._apply(results, [A.Crop(**box), A.Resize(h, w, interpolation=IMG_INTERP,
                                                                mask_interpolation=MASK_INTERP)], crop_masks)
        return apply_pixel_fns(
            results,
            lambda img: fgeometric.resize(fcrops.crop(img, **box), (h, w), interpolation=IMG_INTERP),
            lambda seg: fgeometric.resize(fcrops.crop(seg, **box), (h, w), interpolation=MASK_INTERP),
            crop_masks)

    def __repr__(self) -> str:
        return f'{type(self).__name__}(min_scale={self.min_scale}, aspect_ratio={self.aspect_ratio})'


def _affine_common(adapter: FillAdapter, seg_fill: int) -> dict:
    return dict(interpolation=IMG_INTERP, mask_interpolation=MASK_INTERP, border_mode=cv2.BORDER_CONSTANT,
                fill=adapter.pad_val, fill_mask=seg_fill, p=1.0)


@TRANSFORMS.register_module()
class RandomRotation(FillAdapter):
    """Rotate by an angle ``U(-max_rotation, max_rotation)`` degrees about the centre, with probability ``prob``
    (PaddleSeg's ``RandomRotation``; mmseg's ``RandomRotate`` with ``degree=max_rotation``).

    The output keeps the input's size (mmseg's default; the rotated-out corners are lost) unless ``auto_bound``,
    which enlarges the canvas to hold the whole rotated image (PaddleSeg's behaviour, mmseg's ``auto_bound``).
    Corners from outside get ``pad_val`` / the ignore index.
    """

    def __init__(self, max_rotation: float = 15, prob: float = 1.0, pad_val: float | Sequence[float] = 0,
                 seg_pad_val: int | None = None, auto_bound: bool = False) -> None:
        self.max_rotation = check_range('RandomRotation', 'max_rotation', max_rotation, 0, 180)
        self.prob = check_prob('RandomRotation', prob)
        self.pad_val = check_pad_val('RandomRotation', pad_val)
        self.seg_pad_val = check_seg_pad_val('RandomRotation', seg_pad_val)
        self.auto_bound = bool(auto_bound)

    def _fill_transforms(self, seg_fill: int) -> list[A.BasicTransform]:
        limit = (-self.max_rotation, self.max_rotation)
        if self.auto_bound:
            return [A.Affine(rotate=limit, fit_output=True, **_affine_common(self, seg_fill))]
        return [A.Rotate(limit=limit, **_affine_common(self, seg_fill))]

    def __call__(self, results: dict) -> dict:
        if np.random.random_sample() < self.prob:
            return self._apply_filled(results)
        results['img_shape'] = tuple(int(s) for s in results['img'].shape[:2])
        return results

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(max_rotation={self.max_rotation}, prob={self.prob}, pad_val={self.pad_val}, '
                f'seg_pad_val={self.seg_pad_val}, auto_bound={self.auto_bound})')


@TRANSFORMS.register_module()
class RandomAffine(FillAdapter):
    """Random affine warp with probability ``prob``: scale ``U(min_scale_factor, max_scale_factor)`` (same for x
    and y), rotation ``U(-max_rotation, max_rotation)`` degrees, shear ``U(-max_shear, max_shear)`` degrees on each
    axis, translation ``U(-max_translate_ratio, max_translate_ratio)`` of the width / height.

    PaddleSeg's ``RandomAffine`` argument names (``max_rotation``, ``min_scale_factor``, ``max_scale_factor``) with
    mmdet's ``max_translate_ratio`` / ``max_shear_degree`` (here ``max_shear``); the output keeps the input's size
    (follow it with ``RandomPaddingCrop``/``Resize`` for a fixed one). Uncovered pixels get ``pad_val`` / the
    ignore index.
    """

    def __init__(self, max_rotation: float = 15, min_scale_factor: float = 0.75, max_scale_factor: float = 1.25,
                 max_translate_ratio: float = 0.1, max_shear: float = 2.0, prob: float = 1.0,
                 pad_val: float | Sequence[float] = 0, seg_pad_val: int | None = None) -> None:
        self.max_rotation = check_range('RandomAffine', 'max_rotation', max_rotation, 0, 180)
        for name, value in (('min_scale_factor', min_scale_factor), ('max_scale_factor', max_scale_factor)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise DataError(f'RandomAffine.{name} must be a positive number, got {value!r}')
        if min_scale_factor > max_scale_factor:
            raise DataError(f'RandomAffine: min_scale_factor must be <= max_scale_factor, got '
                            f'min_scale_factor={min_scale_factor!r} > max_scale_factor={max_scale_factor!r}')
        self.min_scale_factor, self.max_scale_factor = float(min_scale_factor), float(max_scale_factor)
        self.max_translate_ratio = check_range('RandomAffine', 'max_translate_ratio', max_translate_ratio, 0, 1)
        self.max_shear = check_range('RandomAffine', 'max_shear', max_shear, 0, 89)
        self.prob = check_prob('RandomAffine', prob)
        self.pad_val = check_pad_val('RandomAffine', pad_val)
        self.seg_pad_val = check_seg_pad_val('RandomAffine', seg_pad_val)

    def _fill_transforms(self, seg_fill: int) -> list[A.BasicTransform]:
        t, s = self.max_translate_ratio, self.max_shear
        return [A.Affine(scale=(self.min_scale_factor, self.max_scale_factor), keep_ratio=True,
                         translate_percent={'x': (-t, t), 'y': (-t, t)},
                         rotate=(-self.max_rotation, self.max_rotation), shear={'x': (-s, s), 'y': (-s, s)},
                         **_affine_common(self, seg_fill))]

    def __call__(self, results: dict) -> dict:
        if np.random.random_sample() < self.prob:
            return self._apply_filled(results)
        results['img_shape'] = tuple(int(s) for s in results['img'].shape[:2])
        return results

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(max_rotation={self.max_rotation}, min_scale_factor={self.min_scale_factor}, '
                f'max_scale_factor={self.max_scale_factor}, max_translate_ratio={self.max_translate_ratio}, '
                f'max_shear={self.max_shear}, prob={self.prob}, pad_val={self.pad_val}, '
                f'seg_pad_val={self.seg_pad_val})')


@TRANSFORMS.register_module()
class RandomHorizontalFlip(RandomFlip):
    """PaddleSeg's ``RandomHorizontalFlip(prob=0.5)``: ``RandomFlip(prob, direction='horizontal')``."""

    def __init__(self, prob: float = 0.5) -> None:
        super().__init__(prob=check_prob('RandomHorizontalFlip', prob), direction='horizontal')

    def __repr__(self) -> str:
        return f'{type(self).__name__}(prob={self.prob})'


@TRANSFORMS.register_module()
class RandomVerticalFlip(RandomFlip):
    """PaddleSeg's ``RandomVerticalFlip(prob=0.1)``: ``RandomFlip(prob, direction='vertical')``."""

    def __init__(self, prob: float = 0.1) -> None:
        super().__init__(prob=check_prob('RandomVerticalFlip', prob), direction='vertical')

    def __repr__(self) -> str:
        return f'{type(self).__name__}(prob={self.prob})'
