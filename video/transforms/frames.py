"""The clip every spatial transform works on, and the argument checks they share.

Why one place: the decoders hand out ``results['imgs']`` as a list of H x W x 3 uint8 BGR frames (one per entry of
``frame_inds``). Every transform here stacks them once into an [N, H, W, 3] array, applies ONE drawn parameter set
to all N frames with a single slice or one OpenCV call per frame, and writes the stacked array back to
``results['imgs']``. Frames of a clip therefore cannot drift apart (the same crop box, flip and colour change for
every frame), and a chain of transforms stacks only once: :func:`get_clip` on an array is free.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import cv2
import numpy as np

from oars.errors import DataError

# Interpolation names of the configs -> OpenCV flags.
INTERPOLATIONS: dict[str, int] = {
    'nearest': cv2.INTER_NEAREST,
    'bilinear': cv2.INTER_LINEAR,
    'bicubic': cv2.INTER_CUBIC,
    'area': cv2.INTER_AREA,
    'lanczos': cv2.INTER_LANCZOS4,
}


def _where(results: dict) -> str:
    return str(results.get('filename') or results.get('frame_dir') or 'a sample')


def get_clip(results: dict, owner: str) -> np.ndarray:
    """``results['imgs']`` as one array.

    Args:
        results: the pipeline dict; ``imgs`` is a list of H x W x 3 uint8 frames or an [N, H, W, 3] uint8 array.
        owner: the calling transform's name, for the error message.

    Returns:
        uint8 [N, H, W, 3] (the array itself when ``imgs`` already is one, else the frames stacked).

    Raises:
        KeyError: no ``imgs`` (the decoder is missing from the pipeline).
        DataError: no frames, frames of different sizes, not 3 channels or not uint8.
    """
    if 'imgs' not in results:
        raise KeyError(f"{owner} needs results['imgs']; put VideoDecode or RawFrameDecode before it")
    imgs = results['imgs']
    if isinstance(imgs, np.ndarray):
        clip = imgs
    else:
        if len(imgs) == 0:
            raise DataError(f'{_where(results)}: {owner} got no frames in imgs')
        shapes = {np.shape(f) for f in imgs}
        if len(shapes) != 1:
            raise DataError(f'{_where(results)}: {owner} needs frames of one size, got shapes {sorted(shapes)}')
        clip = np.stack(imgs)
    if clip.ndim != 4 or clip.shape[-1] != 3 or len(clip) == 0:
        raise DataError(f'{_where(results)}: {owner} needs imgs as N x H x W x 3 frames (N >= 1), got an array of '
                        f'shape {tuple(clip.shape)}; a FormatShape before it already changed the layout')
    if clip.dtype != np.uint8:
        raise DataError(f'{_where(results)}: {owner} needs uint8 frames, got {clip.dtype}')
    return clip


def set_clip(results: dict, clip: np.ndarray) -> dict:
    """Write the [N, H, W, 3] ``clip`` back as ``imgs`` and its (H, W) as ``img_shape``."""
    results['imgs'] = clip
    results['img_shape'] = (int(clip.shape[1]), int(clip.shape[2]))
    return results


def size_arg(value: int | Sequence[int], owner: str, name: str) -> tuple[int, int]:
    """An int ``s`` -> (s, s); a pair -> (w, h). Both positive ints, else ``DataError`` naming ``owner.name``."""
    pair = (value, value) if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else value
    if (not isinstance(pair, (list, tuple)) or len(pair) != 2
            or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v > 0 for v in pair)):
        raise DataError(f'{owner}.{name} must be a positive int or a pair of positive ints (w, h), got {value!r}')
    return int(pair[0]), int(pair[1])


def range_arg(value: Sequence[float], owner: str, name: str, low: float = 0.0, high: float = math.inf) -> tuple[
        float, float]:
    """A pair (a, b) with ``low <= a <= b <= high`` as floats, else ``DataError`` naming ``owner.name``."""
    if (not isinstance(value, (list, tuple)) or len(value) != 2
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
            or not low <= value[0] <= value[1] <= high):
        raise DataError(f'{owner}.{name} must be a pair (a, b) with {low} <= a <= b <= {high}, got {value!r}')
    return float(value[0]), float(value[1])


def interpolation_arg(value: str, owner: str) -> int:
    """An interpolation name -> OpenCV flag, else ``DataError`` listing the names."""
    if value not in INTERPOLATIONS:
        raise DataError(f'{owner}.interpolation must be one of {sorted(INTERPOLATIONS)}, got {value!r}')
    return INTERPOLATIONS[value]


def resize_clip(clip: np.ndarray, size: tuple[int, int], interpolation: int) -> np.ndarray:
    """Resize every frame of a clip.

    Args:
        clip: uint8 [N, H, W, 3] (a view, e.g. a crop, is fine).
        size: (w, h) of the output.
        interpolation: an OpenCV ``INTER_*`` flag.

    Returns:
        uint8 [N, h, w, 3], C-contiguous; ``clip`` itself when it already has that size. One ``cv2.resize`` per
        frame into one preallocated array (OpenCV has no batched resize; a frame is one call either way).
    """
    w, h = size
    if clip.shape[1:3] == (h, w):
        return clip
    out = np.empty((len(clip), h, w, 3), dtype=clip.dtype)
    for i in range(len(clip)):
        cv2.resize(np.ascontiguousarray(clip[i]), (w, h), dst=out[i], interpolation=interpolation)
    return out


def check_crop(results: dict, clip: np.ndarray, crop: tuple[int, int], owner: str) -> None:
    """``DataError`` when a (w, h) crop does not fit in the clip's frames."""
    h, w = clip.shape[1:3]
    if crop[0] > w or crop[1] > h:
        raise DataError(f'{_where(results)}: {owner} crop_size (w, h) = {crop} is larger than the frames '
                        f'(w, h) = {(w, h)}; resize the frames first (Resize short_side >= the crop)')
