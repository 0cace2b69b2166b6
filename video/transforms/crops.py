"""Crops of a clip: one box for every frame (training and single-view test) or several views (multi-view test).

Every crop here is one slice of the stacked [N, H, W, 3] clip, so all frames get the same box. Single crops write
``crop_bbox`` (x1, y1, x2, y2, in the pixels of the frames they cropped); multi-view crops (ThreeCrop, TenCrop)
make ``imgs`` views-major, [view0 frames..., view1 frames...], and set ``num_crops``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from oars.errors import DataError
from oars_deploy.clips.preprocess import centre_offset, three_crop_offsets  # the predictor's: one formula for both
from video.registry import TRANSFORMS
from video.transforms.frames import check_crop, get_clip, interpolation_arg, range_arg, resize_clip, set_clip, size_arg

# TSN's 13 fixed crop positions (MultiScaleCrop, random_crop False), in quarters of the free space (W - w, H - h):
# the 4 corners and the centre, then the 4 edge midpoints and the 4 points halfway between centre and corners.
FIXED_OFFSETS_13: tuple[tuple[int, int], ...] = (
    (0, 0), (4, 0), (0, 4), (4, 4), (2, 2),
    (0, 2), (4, 2), (2, 4), (2, 0),
    (1, 1), (3, 1), (1, 3), (3, 3),
)


def _crop(clip: np.ndarray, x: int, y: int, w: int, h: int) -> np.ndarray:
    return clip[:, y:y + h, x:x + w]


def _single(results: dict, clip: np.ndarray, box: tuple[int, int, int, int]) -> dict:
    x, y, w, h = box
    results['crop_bbox'] = np.array([x, y, x + w, y + h], dtype=np.int64)
    return set_clip(results, _crop(clip, x, y, w, h))


def _views(results: dict, views: list[np.ndarray]) -> dict:
    results['num_crops'] = len(views) * int(results.get('num_crops', 1))
    return set_clip(results, np.concatenate(views, axis=0))


@TRANSFORMS.register_module()
class CenterCrop:
    """Crop the centre ``crop_size`` (an int s -> s x s, or (w, h)) of every frame."""

    def __init__(self, crop_size: int | Sequence[int]) -> None:
        self.crop_size = size_arg(crop_size, 'CenterCrop', 'crop_size')

    def __call__(self, results: dict) -> dict:
        clip = get_clip(results, 'CenterCrop')
        check_crop(results, clip, self.crop_size, 'CenterCrop')
        h, w = clip.shape[1:3]
        cw, ch = self.crop_size
        return _single(results, clip, (centre_offset(w - cw), centre_offset(h - ch), cw, ch))

    def __repr__(self) -> str:
        return f'{type(self).__name__}(crop_size={self.crop_size})'


@TRANSFORMS.register_module()
class ThreeCrop:
    """Three views along the frames' longer free axis: start (left / top), end (right / bottom), centre.

    With the usual test pipeline (short side resized to the crop size) the crops cover the whole short side and
    slide along the long one, as TSN/MMAction2's ThreeCrop; the other axis is centred. Multiplies ``imgs``
    views-major and sets ``num_crops`` (x3).
    """

    def __init__(self, crop_size: int | Sequence[int]) -> None:
        self.crop_size = size_arg(crop_size, 'ThreeCrop', 'crop_size')

    def __call__(self, results: dict) -> dict:
        clip = get_clip(results, 'ThreeCrop')
        check_crop(results, clip, self.crop_size, 'ThreeCrop')
        h, w = clip.shape[1:3]
        cw, ch = self.crop_size
        return _views(results, [_crop(clip, x, y, cw, ch) for x, y in three_crop_offsets(w, h, cw, ch)])

    def __repr__(self) -> str:
        return f'{type(self).__name__}(crop_size={self.crop_size})'


def five_crop_offsets(w: int, h: int, cw: int, ch: int) -> list[tuple[int, int]]:
    """(x, y) of torchvision's ``five_crop``: top-left, top-right, bottom-left, bottom-right, centre."""
    fw, fh = w - cw, h - ch
    return [(0, 0), (fw, 0), (0, fh), (fw, fh), (centre_offset(fw), centre_offset(fh))]


@TRANSFORMS.register_module()
class TenCrop:
    """Ten views: torchvision's ``ten_crop`` order, the five crops (top-left, top-right, bottom-left, bottom-right,
    centre) of the frames, then the five crops of the horizontally flipped frames.

    The flipped views mirror the motion: do not use TenCrop for classes that a mirror changes (left / right
    motion); ThreeCrop keeps them. Multiplies ``imgs`` views-major and sets ``num_crops`` (x10).
    """

    def __init__(self, crop_size: int | Sequence[int]) -> None:
        self.crop_size = size_arg(crop_size, 'TenCrop', 'crop_size')

    def __call__(self, results: dict) -> dict:
        clip = get_clip(results, 'TenCrop')
        check_crop(results, clip, self.crop_size, 'TenCrop')
        h, w = clip.shape[1:3]
        cw, ch = self.crop_size
        offsets = five_crop_offsets(w, h, cw, ch)
        flipped = clip[:, :, ::-1]
        views = [_crop(clip, x, y, cw, ch) for x, y in offsets] + [_crop(flipped, x, y, cw, ch) for x, y in offsets]
        return _views(results, views)

    def __repr__(self) -> str:
        return f'{type(self).__name__}(crop_size={self.crop_size})'


@TRANSFORMS.register_module()
class MultiScaleCrop:
    """TSN's multi-scale crop, then a resize to ``input_size``.

    Crop sides are ``int(min(H, W) * s)`` for ``s`` in ``scales``; a (w, h) pair is drawn among the pairs whose
    scale indices differ by at most ``max_wh_scale_gap`` (so aspect ratios stay near 1); a side within 2 pixels of
    ``input_size`` snaps to it (as TSN does, saving a near-identity resize) when the frames are large enough. The
    crop's position is uniformly random (``random_crop``) or one of TSN's fixed positions: the 4 corners and the
    centre (``num_fixed_crops=5``) or those plus 8 more (13, the default). One draw for the whole clip; NumPy's
    global RNG. The crop is resized to ``input_size`` (w, h), so a following ``Resize`` to the same size is a
    no-op. Writes ``imgs``, ``img_shape``, ``crop_bbox``.
    """

    def __init__(self, input_size: int | Sequence[int], scales: Sequence[float] = (1, 0.875, 0.75, 0.66),
                 max_wh_scale_gap: int = 1, random_crop: bool = False, num_fixed_crops: int = 13,
                 interpolation: str = 'bilinear') -> None:
        self.input_size = size_arg(input_size, 'MultiScaleCrop', 'input_size')
        if (not isinstance(scales, (list, tuple)) or len(scales) == 0
                or not all(isinstance(s, (int, float)) and not isinstance(s, bool) and 0 < s <= 1 for s in scales)):
            raise DataError(f'MultiScaleCrop.scales must be a non-empty list of numbers in (0, 1], got {scales!r}')
        if not isinstance(max_wh_scale_gap, int) or isinstance(max_wh_scale_gap, bool) or max_wh_scale_gap < 0:
            raise DataError(f'MultiScaleCrop.max_wh_scale_gap must be an int >= 0, got {max_wh_scale_gap!r}')
        if num_fixed_crops not in (5, 13):
            raise DataError(f'MultiScaleCrop.num_fixed_crops must be 5 or 13, got {num_fixed_crops!r}')
        self.scales = tuple(float(s) for s in scales)
        self.max_wh_scale_gap = max_wh_scale_gap
        self.random_crop = bool(random_crop)
        self.num_fixed_crops = num_fixed_crops
        self.interpolation = interpolation
        self._interp = interpolation_arg(interpolation, 'MultiScaleCrop')
        n = len(self.scales)
        i, j = np.meshgrid(np.arange(n), np.arange(n), indexing='ij')
        keep = np.abs(i - j) <= max_wh_scale_gap
        # (w scale index, h scale index) of every allowed pair, h-major as TSN lists them.
        self._pairs = np.stack([j[keep], i[keep]], axis=1)
        self._offsets = np.array(FIXED_OFFSETS_13[:num_fixed_crops], dtype=np.int64)

    def crop_box(self, w: int, h: int) -> tuple[int, int, int, int]:
        """A random (x, y, crop_w, crop_h) for frames of size (w, h)."""
        sides = np.array([max(1, int(min(w, h) * s)) for s in self.scales], dtype=np.int64)
        wi, hi = self._pairs[np.random.randint(len(self._pairs))]
        crop = [int(sides[wi]), int(sides[hi])]
        for k, limit in enumerate((w, h)):
            if abs(crop[k] - self.input_size[k]) < 3 and self.input_size[k] <= limit:
                crop[k] = self.input_size[k]
        cw, ch = crop
        if self.random_crop:
            return int(np.random.randint(w - cw + 1)), int(np.random.randint(h - ch + 1)), cw, ch
        qx, qy = self._offsets[np.random.randint(len(self._offsets))]
        return int(qx * ((w - cw) // 4)), int(qy * ((h - ch) // 4)), cw, ch

    def __call__(self, results: dict) -> dict:
        clip = get_clip(results, 'MultiScaleCrop')
        h, w = clip.shape[1:3]
        results = _single(results, clip, self.crop_box(w, h))
        return set_clip(results, resize_clip(results['imgs'], self.input_size, self._interp))

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(input_size={self.input_size}, scales={self.scales}, '
                f'max_wh_scale_gap={self.max_wh_scale_gap}, random_crop={self.random_crop}, '
                f'num_fixed_crops={self.num_fixed_crops}, interpolation={self.interpolation!r})')


@TRANSFORMS.register_module()
class RandomResizedCrop:
    """Inception-style crop: a box of ``area_range`` times the frames' area and an aspect ratio (w / h) drawn
    log-uniformly from ``aspect_ratio_range``, at a uniformly random position.

    Ten candidate boxes are drawn at once and the first that fits is used; if none fits, the centred square of
    the short side. One box for the whole clip (NumPy's global RNG). With ``size`` the crop is resized to it
    (torchvision's RandomResizedCrop); without it (MMAction2's) a ``Resize`` follows in the pipeline. Writes
    ``imgs``, ``img_shape``, ``crop_bbox``.
    """

    max_attempts = 10

    def __init__(self, area_range: Sequence[float] = (0.08, 1.0),
                 aspect_ratio_range: Sequence[float] = (3 / 4, 4 / 3), size: int | Sequence[int] | None = None,
                 interpolation: str = 'bilinear') -> None:
        self.area_range = range_arg(area_range, 'RandomResizedCrop', 'area_range', low=1e-6, high=1.0)
        self.aspect_ratio_range = range_arg(aspect_ratio_range, 'RandomResizedCrop', 'aspect_ratio_range', low=1e-6)
        self.size = None if size is None else size_arg(size, 'RandomResizedCrop', 'size')
        self.interpolation = interpolation
        self._interp = interpolation_arg(interpolation, 'RandomResizedCrop')

    def crop_box(self, w: int, h: int) -> tuple[int, int, int, int]:
        """A random (x, y, crop_w, crop_h) for frames of size (w, h)."""
        log_lo, log_hi = np.log(self.aspect_ratio_range)
        ratios = np.exp(np.random.uniform(log_lo, log_hi, size=self.max_attempts))
        areas = np.random.uniform(*self.area_range, size=self.max_attempts) * (w * h)
        cws = np.round(np.sqrt(areas * ratios)).astype(np.int64)
        chs = np.round(np.sqrt(areas / ratios)).astype(np.int64)
        fits = (cws >= 1) & (chs >= 1) & (cws <= w) & (chs <= h)
        if fits.any():
            k = int(np.argmax(fits))
            cw, ch = int(cws[k]), int(chs[k])
            return int(np.random.randint(w - cw + 1)), int(np.random.randint(h - ch + 1)), cw, ch
        side = min(w, h)
        return (w - side) // 2, (h - side) // 2, side, side

    def __call__(self, results: dict) -> dict:
        clip = get_clip(results, 'RandomResizedCrop')
        h, w = clip.shape[1:3]
        results = _single(results, clip, self.crop_box(w, h))
        if self.size is not None:
            results = set_clip(results, resize_clip(results['imgs'], self.size, self._interp))
        return results

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(area_range={self.area_range}, aspect_ratio_range={self.aspect_ratio_range}, '
                f'size={self.size}, interpolation={self.interpolation!r})')
