"""PaddleSeg's pixel-only augmentations on albumentations: RandomBlur, RandomDistort, RandomNoise.

They change image values only: label maps, instance masks and boxes are not touched (the adapter does not even
pass boxes to albumentations for them). Random draws come from albumentations seeded from numpy's global RNG
(:func:`oars.data.transforms.albu.seed_from_numpy`), so ``randomness.seed`` governs them.
"""

from __future__ import annotations

from collections.abc import Sequence

import albumentations as A
import numpy as np

from oars.data.transforms.albu import AlbuAdapter
from oars.data.transforms.arg_checks import check_prob, check_range
from oars.errors import DataError
from oars.registry import TRANSFORMS

BLUR_TYPES = ('gaussian', 'median', 'blur', 'random')


def opencv_sigma(ksize: int) -> float:
    """The sigma OpenCV's ``GaussianBlur`` uses for a kernel of ``ksize`` when given sigma 0."""
    return 0.3 * ((ksize - 1) * 0.5 - 1) + 0.8


def require_uint8(cls: str, results: dict) -> None:
    """``DataError`` unless ``results['img']`` is uint8 (colour and noise ranges are in 0..255 units)."""
    img = results.get('img')
    if img is not None and img.dtype != np.uint8:
        raise DataError(f'{cls} needs a uint8 image (0..255), got {img.dtype}; put it before Normalize')


@TRANSFORMS.register_module()
class RandomBlur(AlbuAdapter):
    """PaddleSeg's ``RandomBlur``: with probability ``prob`` blur with an odd kernel size drawn from
    ``kernel_range`` (PaddleSeg: 3..9). ``blur_type``: ``gaussian`` (PaddleSeg's ``cv2.GaussianBlur(k, 0)``: sigma
    from the kernel size by OpenCV's rule, ``0.3 * ((k - 1) / 2 - 1) + 0.8``; albumentations' kernel, within a few
    grey levels of OpenCV's tabulated small kernels), ``median``, ``blur`` (box filter), or ``random`` (one of the
    three per sample).
    """

    def __init__(self, prob: float = 0.1, blur_type: str = 'gaussian', kernel_range: Sequence[int] = (3, 9)) -> None:
        self.prob = check_prob('RandomBlur', prob)
        if blur_type not in BLUR_TYPES:
            raise DataError(f'RandomBlur.blur_type must be one of {list(BLUR_TYPES)}, got {blur_type!r}')
        self.blur_type = blur_type
        ok = (isinstance(kernel_range, Sequence) and len(kernel_range) == 2
              and all(isinstance(k, int) and not isinstance(k, bool) and k >= 3 and k % 2 == 1 for k in kernel_range))
        if not ok:
            raise DataError(f'RandomBlur.kernel_range must be (min, max) odd ints >= 3, got {kernel_range!r}')
        if kernel_range[0] > kernel_range[1]:
            raise DataError(f'RandomBlur.kernel_range must have min <= max, got {kernel_range!r}')
        self.kernel_range = (int(kernel_range[0]), int(kernel_range[1]))

    def _albu_transforms(self) -> list[A.BasicTransform | A.BaseCompose]:
        k = self.kernel_range
        # albumentations draws kernel and sigma independently (and sigma 0 is not OpenCV's "from the kernel"):
        # one GaussianBlur per odd kernel size with OpenCV's sigma for it, picked uniformly
        gaussians = [A.GaussianBlur(blur_limit=(n, n), sigma_limit=(opencv_sigma(n), opencv_sigma(n)), p=1.0)
                     for n in range(k[0], k[1] + 1, 2)]
        blurs = {'gaussian': gaussians[0] if len(gaussians) == 1 else A.OneOf(gaussians, p=1.0),
                 'median': A.MedianBlur(blur_limit=k, p=1.0), 'blur': A.Blur(blur_limit=k, p=1.0)}
        if self.blur_type == 'random':
            return [A.OneOf(list(blurs.values()), p=self.prob)]
        blur = blurs[self.blur_type]
        blur.p = self.prob
        return [blur]

    def __call__(self, results: dict) -> dict:
        return self._apply(results)

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(prob={self.prob}, blur_type={self.blur_type!r}, '
                f'kernel_range={self.kernel_range})')


@TRANSFORMS.register_module()
class RandomNoise(AlbuAdapter):
    """PaddleSeg's ``RandomNoise``: with probability ``prob`` add Gaussian noise of standard deviation
    ``U(0, max_sigma)`` (0..255 units, independent per pixel and channel), clipped to 0..255. Needs uint8."""

    def __init__(self, prob: float = 0.5, max_sigma: float = 10.0) -> None:
        self.prob = check_prob('RandomNoise', prob)
        if isinstance(max_sigma, bool) or not isinstance(max_sigma, (int, float)) or not 0 < max_sigma <= 255:
            raise DataError(f'RandomNoise.max_sigma must be a number in (0, 255], got {max_sigma!r}')
        self.max_sigma = float(max_sigma)

    def _albu_transforms(self) -> list[A.BasicTransform]:
        # std_range is a fraction of the dtype's maximum (255 for uint8)
        return [A.GaussNoise(std_range=(0.0, self.max_sigma / 255.0), mean_range=(0.0, 0.0), per_channel=True,
                             p=self.prob)]

    def __call__(self, results: dict) -> dict:
        require_uint8('RandomNoise', results)
        return self._apply(results)

    def __repr__(self) -> str:
        return f'{type(self).__name__}(prob={self.prob}, max_sigma={self.max_sigma})'


@TRANSFORMS.register_module()
class RandomDistort(AlbuAdapter):
    """PaddleSeg's ``RandomDistort``: brightness, contrast, saturation, hue and sharpness, each applied with its
    own probability, in a random order per sample.

    Unlike mmseg's ``PhotoMetricDistortion`` (additive brightness, fixed order, each step at p=0.5), brightness is
    a factor: every factor is ``U(1 - range, 1 + range)`` and blends as PIL's ``ImageEnhance`` (brightness: with
    black, contrast: with the mean grey, saturation: with the grey image — albumentations' ``ColorJitter``).
    ``hue_range`` is in PaddleSeg's units, PIL's 0..255 hue scale: the hue shifts by ``U(-hue_range, hue_range) /
    256`` of the colour circle. Sharpness uses albumentations' ``Sharpen`` with ``alpha ~ U(0, sharpness_range)``
    (it sharpens only; PIL's factor < 1 also smooths). Needs a uint8 image; runs in RGB.
    """

    bgr_to_rgb = True

    def __init__(self, brightness_range: float = 0.5, brightness_prob: float = 0.5, contrast_range: float = 0.5,
                 contrast_prob: float = 0.5, saturation_range: float = 0.5, saturation_prob: float = 0.5,
                 hue_range: float = 18, hue_prob: float = 0.5, sharpness_range: float = 0.5,
                 sharpness_prob: float = 0.0) -> None:
        cls = 'RandomDistort'
        self.brightness_range = check_range(cls, 'brightness_range', brightness_range, 0, 1)
        self.contrast_range = check_range(cls, 'contrast_range', contrast_range, 0, 1)
        self.saturation_range = check_range(cls, 'saturation_range', saturation_range, 0, 1)
        self.hue_range = check_range(cls, 'hue_range', hue_range, 0, 128)
        self.sharpness_range = check_range(cls, 'sharpness_range', sharpness_range, 0, 1)
        self.brightness_prob = check_prob(cls, brightness_prob, 'brightness_prob')
        self.contrast_prob = check_prob(cls, contrast_prob, 'contrast_prob')
        self.saturation_prob = check_prob(cls, saturation_prob, 'saturation_prob')
        self.hue_prob = check_prob(cls, hue_prob, 'hue_prob')
        self.sharpness_prob = check_prob(cls, sharpness_prob, 'sharpness_prob')

    @staticmethod
    def _jitter(p: float, brightness: float = 0.0, contrast: float = 0.0, saturation: float = 0.0,
                hue: float = 0.0) -> A.ColorJitter:
        """A ColorJitter that changes one property (the others at factor 1 / shift 0)."""
        return A.ColorJitter(brightness=(1 - brightness, 1 + brightness), contrast=(1 - contrast, 1 + contrast),
                             saturation=(1 - saturation, 1 + saturation), hue=(-hue, hue), p=p)

    def _albu_transforms(self) -> list[A.BasicTransform | A.BaseCompose]:
        steps: list[A.BasicTransform] = []
        if self.brightness_prob > 0 and self.brightness_range > 0:
            steps.append(self._jitter(self.brightness_prob, brightness=self.brightness_range))
        if self.contrast_prob > 0 and self.contrast_range > 0:
            steps.append(self._jitter(self.contrast_prob, contrast=self.contrast_range))
        if self.saturation_prob > 0 and self.saturation_range > 0:
            steps.append(self._jitter(self.saturation_prob, saturation=self.saturation_range))
        if self.hue_prob > 0 and self.hue_range > 0:
            steps.append(self._jitter(self.hue_prob, hue=self.hue_range / 256.0))
        if self.sharpness_prob > 0 and self.sharpness_range > 0:
            steps.append(A.Sharpen(alpha=(0.0, self.sharpness_range), lightness=(1.0, 1.0), p=self.sharpness_prob))
        if not steps:
            return [A.NoOp()]
        return [A.RandomOrder(steps, n=len(steps), replace=False, p=1.0)]

    def __call__(self, results: dict) -> dict:
        require_uint8('RandomDistort', results)
        return self._apply(results)

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(brightness_range={self.brightness_range}, brightness_prob='
                f'{self.brightness_prob}, contrast_range={self.contrast_range}, contrast_prob={self.contrast_prob}, '
                f'saturation_range={self.saturation_range}, saturation_prob={self.saturation_prob}, '
                f'hue_range={self.hue_range}, hue_prob={self.hue_prob}, sharpness_range={self.sharpness_range}, '
                f'sharpness_prob={self.sharpness_prob})')
