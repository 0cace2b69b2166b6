"""Argument checks of the named transforms: each returns the normalised value or raises ``DataError`` (a
``ValueError``) naming ``Class.argument``, the value and what was expected, at build time."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from oars.errors import DataError


def positive_int(cls: str, name: str, value: object) -> int:
    """``value`` as an int > 0, else ``DataError`` naming ``cls.name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise DataError(f'{cls}.{name} must be a positive int, got {value!r}')
    return int(value)


def scale_range(cls: str, lo_name: str, lo: object, hi_name: str, hi: object) -> tuple[float, float]:
    """``(lo, hi)`` as floats with ``0 < lo <= hi``, else ``DataError`` naming the class and the arguments."""
    for name, value in ((lo_name, lo), (hi_name, hi)):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or value <= 0:
            raise DataError(f'{cls}.{name} must be a positive number, got {value!r}')
    if lo > hi:  # type: ignore[operator]
        raise DataError(f'{cls}: {lo_name} must be <= {hi_name}, got {lo_name}={lo!r} > {hi_name}={hi!r}')
    return float(lo), float(hi)  # type: ignore[arg-type]


def check_prob(cls: str, prob: object, name: str = 'prob') -> float:
    """``prob`` as a float in [0, 1], else ``DataError`` naming ``cls.name``."""
    if isinstance(prob, bool) or not isinstance(prob, (int, float)) or not 0 <= prob <= 1:
        raise DataError(f'{cls}.{name} must be a number in [0, 1], got {prob!r}')
    return float(prob)


def check_range(cls: str, name: str, value: object, lo: float, hi: float) -> float:
    """``value`` as a float in [lo, hi], else ``DataError`` naming ``cls.name`` and the range."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
        raise DataError(f'{cls}.{name} must be a number in [{lo}, {hi}], got {value!r}')
    return float(value)


def check_pad_val(cls: str, pad_val: object) -> float | tuple[float, ...]:
    """The image fill: one number or one per channel."""
    if isinstance(pad_val, (int, float)) and not isinstance(pad_val, bool):
        return float(pad_val)
    if isinstance(pad_val, Sequence) and pad_val and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in pad_val):
        return tuple(float(v) for v in pad_val)
    raise DataError(f'{cls}.pad_val must be a number or a list of numbers (one per channel), got {pad_val!r}')


def check_seg_pad_val(cls: str, seg_pad_val: object) -> int | None:
    """The label fill: None (the sample's ignore_index) or an int in [0, 65535]."""
    if seg_pad_val is None:
        return None
    if isinstance(seg_pad_val, bool) or not isinstance(seg_pad_val, (int, np.integer)) or not 0 <= seg_pad_val < 2**16:
        raise DataError(f'{cls}.seg_pad_val must be None (use the dataset\'s ignore_index) or an int in '
                        f'[0, 65535], got {seg_pad_val!r}')
    return int(seg_pad_val)
