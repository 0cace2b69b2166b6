"""PaddleSeg's resize policies (by long side, by short side, random long side, stepped random scale).

Each picks one keep-ratio factor per sample and hands the op to :func:`resize_results` (albumentations'
functional resize: image bilinear, label map and instance masks nearest, boxes scaled), so the size rule is the
deploy predictors' :func:`oars_deploy.preprocess.scaled_size` (rounded half up, >= 1 pixel per side) and
``img_shape`` / ``scale_factor`` are kept as by :class:`~oars.data.transforms.geometric.Resize`. Random draws come
from numpy's global RNG (``randomness.seed`` governs them).
"""

from __future__ import annotations

import numpy as np

from oars.data.transforms.albu import AlbuAdapter
from oars.data.transforms.arg_checks import positive_int, scale_range
from oars.data.transforms.geometric import resize_results
from oars.errors import DataError
from oars.registry import TRANSFORMS
from oars_deploy.preprocess import scaled_size


def resize_by_factor(results: dict, adapter: AlbuAdapter, factor: float) -> dict:
    """Resize image, label map, instance masks and boxes of ``results`` by ``factor`` keeping the aspect ratio.

    The new (W, H) is ``scaled_size(w, h, factor)``; ``results['keep_ratio']`` is True afterwards.
    """
    h, w = results['img'].shape[:2]
    results = resize_results(results, adapter, scaled_size(w, h, factor), keep_ratio=False)
    results['keep_ratio'] = True
    return results


@TRANSFORMS.register_module()
class ResizeByLong(AlbuAdapter):
    """PaddleSeg's ``ResizeByLong``: the long side becomes ``long_size``, the short side keeps the aspect ratio.

    The same op as ``Resize(scale=long_size, keep_ratio=True)`` (mmseg), which is the form ``tools/export.py``
    can write into deploy.yaml; use that one in a test pipeline that will be exported.
    """

    def __init__(self, long_size: int) -> None:
        self.long_size = positive_int('ResizeByLong', 'long_size', long_size)

    def __call__(self, results: dict) -> dict:
        return resize_by_factor(results, self, self.long_size / max(results['img'].shape[:2]))

    def __repr__(self) -> str:
        return f'{type(self).__name__}(long_size={self.long_size})'


@TRANSFORMS.register_module()
class ResizeByShort(AlbuAdapter):
    """PaddleSeg's ``ResizeByShort``: the short side becomes ``short_size``, keeping the aspect ratio.

    ``max_size`` (optional, detectron2's ``ResizeShortestEdge``): shrink further so the long side is at most
    ``max_size``. With it the op equals mmseg's ``Resize(scale=(max_size, short_size), keep_ratio=True)``.
    """

    def __init__(self, short_size: int, max_size: int | None = None) -> None:
        self.short_size = positive_int('ResizeByShort', 'short_size', short_size)
        self.max_size = None if max_size is None else positive_int('ResizeByShort', 'max_size', max_size)
        if self.max_size is not None and self.max_size < self.short_size:
            raise DataError(f'ResizeByShort: max_size must be >= short_size, got max_size={max_size!r} < '
                            f'short_size={short_size!r}')

    def __call__(self, results: dict) -> dict:
        h, w = results['img'].shape[:2]
        factor = self.short_size / min(h, w)
        if self.max_size is not None:
            factor = min(factor, self.max_size / max(h, w))
        return resize_by_factor(results, self, factor)

    def __repr__(self) -> str:
        return f'{type(self).__name__}(short_size={self.short_size}, max_size={self.max_size})'


@TRANSFORMS.register_module()
class ResizeRangeScaling(AlbuAdapter):
    """PaddleSeg's ``ResizeRangeScaling``: resize so the long side is a random integer in
    ``[min_value, max_value]`` (uniform, rounded), keeping the aspect ratio. Multi-scale training by size
    instead of by ratio (compare ``RandomResize`` and ``ResizeStepScaling``)."""

    def __init__(self, min_value: int = 400, max_value: int = 600) -> None:
        lo = positive_int('ResizeRangeScaling', 'min_value', min_value)
        hi = positive_int('ResizeRangeScaling', 'max_value', max_value)
        if lo > hi:
            raise DataError(f'ResizeRangeScaling: min_value must be <= max_value, got min_value={lo} > '
                            f'max_value={hi}')
        self.min_value, self.max_value = lo, hi

    def __call__(self, results: dict) -> dict:
        value = self.min_value
        if self.max_value > self.min_value:
            value = int(np.random.uniform(self.min_value, self.max_value) + 0.5)
        return resize_by_factor(results, self, value / max(results['img'].shape[:2]))

    def __repr__(self) -> str:
        return f'{type(self).__name__}(min_value={self.min_value}, max_value={self.max_value})'


@TRANSFORMS.register_module()
class ResizeStepScaling(AlbuAdapter):
    """PaddleSeg's ``ResizeStepScaling``: multiply both sides by a factor drawn uniformly from
    ``min_scale_factor, min_scale_factor + scale_step_size, ..., max_scale_factor`` (``scale_step_size=0``:
    any factor in the range; equal bounds: always that factor)."""

    def __init__(self, min_scale_factor: float = 0.75, max_scale_factor: float = 1.25,
                 scale_step_size: float = 0.25) -> None:
        self.min_scale_factor, self.max_scale_factor = scale_range(
            'ResizeStepScaling', 'min_scale_factor', min_scale_factor, 'max_scale_factor', max_scale_factor)
        if isinstance(scale_step_size, bool) or not isinstance(scale_step_size, (int, float)) or scale_step_size < 0:
            raise DataError(f'ResizeStepScaling.scale_step_size must be a number >= 0, got {scale_step_size!r}')
        self.scale_step_size = float(scale_step_size)
        lo, hi, step = self.min_scale_factor, self.max_scale_factor, self.scale_step_size
        # the steps of the range (PaddleSeg's count: the bounds and every full step between them)
        self.factors = np.linspace(lo, hi, int((hi - lo) / step + 1 + 1e-9)) if step > 0 and hi > lo else None

    def _factor(self) -> float:
        lo, hi = self.min_scale_factor, self.max_scale_factor
        if hi == lo:
            return lo
        if self.factors is None:
            return float(np.random.uniform(lo, hi))
        return float(self.factors[np.random.randint(len(self.factors))])

    def __call__(self, results: dict) -> dict:
        return resize_by_factor(results, self, self._factor())

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(min_scale_factor={self.min_scale_factor}, '
                f'max_scale_factor={self.max_scale_factor}, scale_step_size={self.scale_step_size})')
