"""Colour jitter of a clip: one set of factors for every frame."""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from oars.errors import DataError
from video.registry import TRANSFORMS
from video.transforms.frames import get_clip, set_clip

# ITU-R 601 luma weights (torchvision's rgb_to_grayscale) in the frames' BGR order.
_GREY_BGR = np.array([0.114, 0.587, 0.299], dtype=np.float32)


def _factor_range(value: float | Sequence[float], name: str, centre: float, low: float, high: float,
                  max_number: float = float('inf')) -> tuple[float, float]:
    """torchvision's ColorJitter argument rule: a number v in [0, max_number] -> [centre - v, centre + v] clipped
    to [low, high]; a pair (a, b) as given, inside [low, high]."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not 0 <= value <= max_number:
            raise DataError(f'ColorJitter.{name} must be a number in [0, {max_number}] or a pair (min, max), '
                            f'got {value!r}')
        return max(low, centre - value), min(high, centre + value)
    if (isinstance(value, (list, tuple)) and len(value) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
            and low <= value[0] <= value[1] <= high):
        return float(value[0]), float(value[1])
    raise DataError(f'ColorJitter.{name} must be a number >= 0 or a pair (min, max) inside [{low}, {high}], '
                    f'got {value!r}')


def grey(clip: np.ndarray) -> np.ndarray:
    """Luma float32 [N, H, W, 1] of a float32 BGR clip [N, H, W, 3]."""
    return (clip @ _GREY_BGR)[..., None]


def _clip255(x: np.ndarray) -> np.ndarray:
    # in place (measured: 5x faster than np.clip into a new array, 5x faster than np.maximum + np.minimum)
    return np.clip(x, np.float32(0.0), np.float32(255.0), out=x)


def adjust_brightness(clip: np.ndarray, factor: float) -> np.ndarray:
    """float32 BGR [N, H, W, 3] in [0, 255] times ``factor``, clipped (torchvision's adjust_brightness)."""
    return _clip255(clip * np.float32(factor))


def _blend(clip: np.ndarray, other: np.ndarray, factor: float) -> np.ndarray:
    """``factor * clip + (1 - factor) * other`` clipped to [0, 255] (torchvision's ``_blend``); ``other``
    broadcasts ([N, H, W, 1] luma or [N, 1, 1, 1] means)."""
    out = clip * np.float32(factor)
    out += other * np.float32(1.0 - factor)
    return _clip255(out)


def adjust_contrast(clip: np.ndarray, factor: float) -> np.ndarray:
    """Blend each frame with its mean luma (torchvision's adjust_contrast on a batch: one mean per frame)."""
    return _blend(clip, grey(clip).mean(axis=(1, 2, 3), keepdims=True), factor)


def adjust_saturation(clip: np.ndarray, factor: float) -> np.ndarray:
    """Blend every pixel with its luma (torchvision's adjust_saturation)."""
    return _blend(clip, grey(clip), factor)


def adjust_hue(clip: np.ndarray, factor: float) -> np.ndarray:
    """Rotate the hue by ``factor`` turns (torchvision's adjust_hue, factor in [-0.5, 0.5]).

    One OpenCV float HSV round trip on all frames at once (the clip viewed as one [N*H, W, 3] image); float32
    HSV keeps full precision (hue in degrees), unlike 8-bit HSV's 2-degree steps.
    """
    n, h, w, _ = clip.shape
    hsv = cv2.cvtColor(clip.reshape(n * h, w, 3) * np.float32(1.0 / 255.0), cv2.COLOR_BGR2HSV)
    # A shift in [0, 360): hues reach [0, 720), which OpenCV's float HSV2BGR wraps itself (h >= 6 sectors -> h - 6;
    # it does not wrap negative hues). The torchvision parity tests cover shifts past 360 both ways.
    hue = hsv[..., 0]
    hue += np.float32((factor * 360.0) % 360.0)
    out = cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR)
    out *= np.float32(255.0)
    return _clip255(out.reshape(n, h, w, 3))


@TRANSFORMS.register_module()
class ColorJitter:
    """Random brightness, contrast, saturation and hue changes (torchvision's ColorJitter semantics), the same
    factors and order for every frame of the clip.

    Each argument is a number ``v`` (factor drawn uniformly from [1 - v, 1 + v], clipped at 0; hue from [-v, v],
    v <= 0.5) or a (min, max) pair; 0 switches that change off. The four changes run in a random order, as in
    torchvision. Computed in float32 on the stacked clip and rounded back to uint8 once. Defaults are MMAction2's.
    Draws use NumPy's global RNG. Writes ``imgs`` and ``color_jitter`` (the drawn factors and order, for
    debugging and tests).
    """

    def __init__(self, brightness: float | Sequence[float] = 0.5, contrast: float | Sequence[float] = 0.5,
                 saturation: float | Sequence[float] = 0.5, hue: float | Sequence[float] = 0.1) -> None:
        inf = float('inf')
        self.brightness = _factor_range(brightness, 'brightness', 1.0, 0.0, inf)
        self.contrast = _factor_range(contrast, 'contrast', 1.0, 0.0, inf)
        self.saturation = _factor_range(saturation, 'saturation', 1.0, 0.0, inf)
        self.hue = _factor_range(hue, 'hue', 0.0, -0.5, 0.5, max_number=0.5)

    def draw(self) -> dict:
        """One draw: {'order': [names...], 'brightness': f, 'contrast': f, 'saturation': f, 'hue': f}, leaving
        out the changes whose range is the identity."""
        ranges = {'brightness': (self.brightness, 1.0), 'contrast': (self.contrast, 1.0),
                  'saturation': (self.saturation, 1.0), 'hue': (self.hue, 0.0)}
        names = list(ranges)
        order = [names[i] for i in np.random.permutation(len(names))]
        params: dict = {'order': []}
        for name in order:
            (lo, hi), identity = ranges[name]
            if lo == hi == identity:
                continue
            params[name] = float(np.random.uniform(lo, hi))
            params['order'].append(name)
        return params

    @staticmethod
    def apply(clip: np.ndarray, params: dict) -> np.ndarray:
        """Apply drawn ``params`` to a uint8 BGR clip [N, H, W, 3]; uint8 [N, H, W, 3]."""
        if not params['order']:
            return clip
        ops = {'brightness': adjust_brightness, 'contrast': adjust_contrast, 'saturation': adjust_saturation,
               'hue': adjust_hue}
        out = clip.astype(np.float32)
        for name in params['order']:
            out = ops[name](out, params[name])
        return np.rint(out, out=out).astype(np.uint8)  # every change leaves [0, 255]

    def __call__(self, results: dict) -> dict:
        clip = get_clip(results, 'ColorJitter')
        params = self.draw()
        results['color_jitter'] = params
        return set_clip(results, self.apply(clip, params))

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(brightness={self.brightness}, contrast={self.contrast}, '
                f'saturation={self.saturation}, hue={self.hue})')
