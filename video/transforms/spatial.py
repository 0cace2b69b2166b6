"""Resize and flip every frame of a clip with one parameter set."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from oars.errors import DataError
from oars_deploy.clips.preprocess import clip_resize_size
from video.registry import TRANSFORMS
from video.transforms.frames import get_clip, interpolation_arg, resize_clip, set_clip

FLIP_DIRECTIONS = ('horizontal', 'vertical')


@TRANSFORMS.register_module()
class Resize:
    """Resize all frames of a clip to one size.

    Give exactly one of:

    - ``short_side: s``: the short side becomes ``s``, the aspect ratio is kept;
    - ``scale: [w, h]`` (MMAction2's form) with ``keep_ratio: true``: the largest size of the frames' aspect ratio
      whose long side is at most ``max(w, h)`` and short side at most ``min(w, h)``; a ``-1`` leaves that bound
      open, so ``scale: [-1, 256]`` is "short side 256". With ``keep_ratio: false`` the frames become exactly
      ``w x h`` (no ``-1``);
    - ``scale: f`` (a float): both sides times ``f``.

    Sizes are rounded half up with at least 1 pixel per side (the rule of oars' image ``Resize`` and of the deploy
    predictors). Frames that already have the target size are not touched. Writes ``imgs`` [N, h, w, 3],
    ``img_shape`` and ``scale_factor`` (w_new / w, h_new / h) as float32 [2].
    """

    def __init__(self, scale: float | Sequence[int] | None = None, short_side: int | None = None,
                 keep_ratio: bool = True, interpolation: str = 'bilinear') -> None:
        if (scale is None) == (short_side is None):
            raise DataError(f'Resize needs exactly one of scale and short_side, got scale={scale!r}, '
                            f'short_side={short_side!r}')
        self.interpolation = interpolation
        self._interp = interpolation_arg(interpolation, 'Resize')
        self.keep_ratio = bool(keep_ratio)
        self.scale = scale
        self.short_side = short_side
        if short_side is not None:
            if not isinstance(short_side, int) or isinstance(short_side, bool) or short_side < 1:
                raise DataError(f'Resize.short_side must be a positive int, got {short_side!r}')
            if not keep_ratio:
                raise DataError('Resize.short_side keeps the aspect ratio; use scale: [w, h] with keep_ratio: '
                                'false for a fixed size')
        elif isinstance(scale, float):
            if not scale > 0:
                raise DataError(f'Resize.scale as a factor must be > 0, got {scale!r}')
        else:
            ok = (isinstance(scale, (list, tuple)) and len(scale) == 2
                  and all(isinstance(v, int) and not isinstance(v, bool) and (v > 0 or v == -1) for v in scale)
                  and max(scale) > 0)
            if not ok:
                raise DataError(f'Resize.scale must be a factor (float > 0) or [w, h] of positive ints (one may be '
                                f'-1: unbounded), got {scale!r}')
            if not keep_ratio and -1 in scale:
                raise DataError(f'Resize.scale {list(scale)} has -1, which needs keep_ratio: true')

    def target_size(self, w: int, h: int) -> tuple[int, int]:
        """The (w, h) that frames of size (w, h) are resized to (the rule lives in the torch-free
        ``oars_deploy.clips.preprocess``, which the deployed predictor runs too)."""
        return clip_resize_size(w, h, self.scale, self.short_side, self.keep_ratio)

    def __call__(self, results: dict) -> dict:
        clip = get_clip(results, 'Resize')
        h, w = clip.shape[1:3]
        new_w, new_h = self.target_size(w, h)
        factor = np.array([new_w / w, new_h / h], dtype=np.float32)
        prev = results.get('scale_factor')
        results['scale_factor'] = factor if prev is None else np.asarray(prev, dtype=np.float32) * factor
        results['keep_ratio'] = self.keep_ratio
        return set_clip(results, resize_clip(clip, (new_w, new_h), self._interp))

    def __repr__(self) -> str:
        arg = f'short_side={self.short_side}' if self.short_side is not None else f'scale={self.scale!r}'
        return f'{type(self).__name__}({arg}, keep_ratio={self.keep_ratio}, interpolation={self.interpolation!r})'


def _label_map(value: Mapping | None) -> dict[int, int]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
            isinstance(k, int) and isinstance(v, int) and not isinstance(k, bool) and not isinstance(v, bool)
            for k, v in value.items()):
        raise DataError(f'Flip.flip_label_map must map class ids to class ids ({{from: to}}, ints), got {value!r}')
    return {int(k): int(v) for k, v in value.items()}


@TRANSFORMS.register_module()
class Flip:
    """Flip every frame of a clip with probability ``prob`` (one draw per clip).

    ``flip_label_map: {from: to}`` relabels flipped samples whose class a mirror image changes: for motion classes
    a horizontally flipped "moves left" clip shows "moves right", so the map must swap them (and clockwise /
    counter-clockwise rotation), or flipping corrupts the labels. Classes not in the map keep their id; multi-label
    samples map each id. Writes ``imgs``, ``flip`` (bool), ``flip_direction`` and, when relabelled, ``label``.
    """

    def __init__(self, prob: float = 0.5, direction: str = 'horizontal',
                 flip_label_map: Mapping[int, int] | None = None) -> None:
        if not isinstance(prob, (int, float)) or isinstance(prob, bool) or not 0.0 <= prob <= 1.0:
            raise DataError(f'Flip.prob must be a probability in [0, 1], got {prob!r}')
        if direction not in FLIP_DIRECTIONS:
            raise DataError(f'Flip.direction must be one of {FLIP_DIRECTIONS}, got {direction!r}')
        self.prob = float(prob)
        self.direction = direction
        self.flip_label_map = _label_map(flip_label_map)

    def _relabel(self, label: int | Sequence[int]) -> int | list[int]:
        if isinstance(label, (int, np.integer)):
            return self.flip_label_map.get(int(label), int(label))
        return [self.flip_label_map.get(int(c), int(c)) for c in label]

    def __call__(self, results: dict) -> dict:
        clip = get_clip(results, 'Flip')
        flip = self.prob > 0 and np.random.rand() < self.prob
        results['flip'] = bool(flip)
        results['flip_direction'] = self.direction
        if flip:
            clip = clip[:, :, ::-1] if self.direction == 'horizontal' else clip[:, ::-1]
            if self.flip_label_map and results.get('label') is not None:
                results['label'] = self._relabel(results['label'])
        return set_clip(results, clip)

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(prob={self.prob}, direction={self.direction!r}, '
                f'flip_label_map={self.flip_label_map})')
