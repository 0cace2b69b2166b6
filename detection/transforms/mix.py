"""Transforms that mix several images (YOLOv4/YOLOX): Mosaic and MixUp.

They need other samples than the one being transformed: ``MultiImageMixDataset`` calls
``get_indexes(dataset)`` (drawn with numpy's global RNG, seeded by the engine), loads those samples with
the inner dataset's pipeline (image + annotations) and passes them in ``results['mix_results']``.
Box maths are vectorised; boxes are clipped to the output and degenerate ones dropped with their labels
and ignore flags (the core MIN_BOX_SIZE rule).
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from detection.registry import TRANSFORMS
from detection.transforms.boxes import BOX_ARRAY_KEYS, box_fields, clip_and_drop
from oars.data.transforms.albu import MASKS_KEY
from oars.data.transforms.geometric import to_pair
from oars.errors import DataError


def _mix_results(results: dict, n: int, name: str) -> list[dict]:
    mixes = results.get('mix_results')
    if mixes is None or len(mixes) < n:
        got = 'none' if mixes is None else len(mixes)
        raise DataError(f"{name} needs results['mix_results'] with {n} other samples (got {got}); wrap the dataset "
                        f"in MultiImageMixDataset and put {name} in its pipeline")
    return list(mixes[:n])


def _fit_resize(img: np.ndarray, size: tuple[int, int]) -> tuple[np.ndarray, float, float]:
    """Resize ``img`` (bilinear) to fit inside ``size`` (W, H) keeping its aspect ratio; return it and the
    exact (x, y) scales it was resized by (the integer size rounds each axis a little differently)."""
    h, w = img.shape[:2]
    scale = min(size[1] / h, size[0] / w)
    new_w, new_h = max(int(w * scale + 0.5), 1), max(int(h * scale + 0.5), 1)
    if (new_w, new_h) != (w, h):
        img = cv2.resize(img, (new_w, new_h), interpolation=cv2.INTER_LINEAR)
    return img, new_w / w, new_h / h


def _canvas(shape: tuple[int, int], like: np.ndarray, pad_val: float) -> np.ndarray:
    return np.full((*shape, *like.shape[2:]), pad_val, dtype=like.dtype)


def _concat(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {key: np.concatenate([p[key] for p in parts], axis=0) for key in BOX_ARRAY_KEYS}


def _no_masks(samples: list[dict], name: str) -> None:
    """Mosaic and MixUp move boxes only: a sample with instance masks would come out with masks that no longer
    match the image, so it is an error rather than a silent misalignment."""
    for sample in samples:
        if sample.get(MASKS_KEY) is not None:
            raise DataError(f"{name} does not move instance masks, but {sample.get('img_path', 'a sample')} has "
                            f"gt_masks (LoadAnnotations with_mask=True); remove {name} from a mask model's pipeline "
                            'or load boxes only')


def _check_prob(prob: float, name: str) -> float:
    if not 0 <= prob <= 1:
        raise DataError(f'{name}.prob must be in [0, 1], got {prob!r}')
    return float(prob)


@TRANSFORMS.register_module()
class Mosaic:
    """Four images around a random centre on a (2H, 2W) canvas (``img_scale`` = (W, H)), filled with ``pad_val``.

    Each image is resized to fit (W, H) keeping its ratio and placed in its quadrant (this sample top-left,
    then the three ``mix_results``) against the centre ``(cx, cy) = (W, H) * U(center_ratio_range)``; parts
    beyond the canvas are cut. The output is (2H, 2W): follow it with a resize or crop (e.g. core ``Resize``
    or albumentations' ``Affine``/``RandomSizedBBoxSafeCrop`` through ``Albu``). Applied with probability ``prob``.
    Boxes only: a sample with instance masks (``gt_masks``) is a ``DataError``.
    """

    def __init__(self, img_scale: int | Sequence[int] = (640, 640), center_ratio_range: Sequence[float] = (0.5, 1.5),
                 pad_val: float = 114, prob: float = 1.0) -> None:
        self.img_scale = to_pair(img_scale, 'Mosaic.img_scale', '(W, H)')
        if len(center_ratio_range) != 2 or not 0 <= center_ratio_range[0] <= center_ratio_range[1] <= 2:
            raise DataError(f'Mosaic.center_ratio_range must be (min, max) in [0, 2], got {center_ratio_range!r}')
        self.center_ratio_range = (float(center_ratio_range[0]), float(center_ratio_range[1]))
        self.pad_val = pad_val
        self.prob = _check_prob(prob, 'Mosaic')

    def get_indexes(self, dataset) -> list[int]:
        """Three random sample indexes of ``dataset`` (numpy's global RNG)."""
        return np.random.randint(0, len(dataset), size=3).tolist()

    def __call__(self, results: dict) -> dict:
        if np.random.random_sample() >= self.prob:
            return results
        samples = [results, *_mix_results(results, 3, 'Mosaic')]
        _no_masks(samples, 'Mosaic')
        w, h = self.img_scale
        cx = int(np.random.uniform(*self.center_ratio_range) * w)
        cy = int(np.random.uniform(*self.center_ratio_range) * h)
        canvas = _canvas((2 * h, 2 * w), results['img'], self.pad_val)
        parts = []
        for quadrant, sample in enumerate(samples):
            img, sx, sy = _fit_resize(sample['img'], self.img_scale)
            ih, iw = img.shape[:2]
            # where the image's top-left corner lands on the canvas (it touches the centre with one corner)
            x0 = cx - iw if quadrant in (0, 2) else cx
            y0 = cy - ih if quadrant in (0, 1) else cy
            cx1, cy1 = max(x0, 0), max(y0, 0)
            cx2, cy2 = min(x0 + iw, 2 * w), min(y0 + ih, 2 * h)
            canvas[cy1:cy2, cx1:cx2] = img[cy1 - y0:cy2 - y0, cx1 - x0:cx2 - x0]
            fields = box_fields(sample)
            fields['gt_bboxes'] = (fields['gt_bboxes'] * np.array([sx, sy, sx, sy], np.float32)
                                   + np.array([x0, y0, x0, y0], np.float32))
            parts.append(fields)
        results.update(_concat(parts))
        results['img'] = canvas
        results['img_shape'] = canvas.shape[:2]
        return clip_and_drop(results, canvas.shape[:2])

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(img_scale={self.img_scale}, center_ratio_range={self.center_ratio_range}, '
                f'pad_val={self.pad_val}, prob={self.prob})')


@TRANSFORMS.register_module()
class MixUp:
    """Blend this sample 50/50 with another one (YOLOX's MixUp), boxes of both kept.

    The other image is resized to fit ``img_scale`` (W, H) keeping its ratio, placed top-left on a
    ``pad_val`` canvas of that size, rescaled by ``r ~ U(ratio_range)``, flipped horizontally with probability
    ``flip_ratio``, then a window of this sample's size is taken from it at a random offset (padding with
    ``pad_val`` where it is smaller). Applied with probability ``prob``; a partner without boxes leaves the
    sample unchanged. Boxes only: a sample with instance masks (``gt_masks``) is a ``DataError``.
    """

    def __init__(self, img_scale: int | Sequence[int] = (640, 640), ratio_range: Sequence[float] = (0.5, 1.5),
                 flip_ratio: float = 0.5, pad_val: float = 114, prob: float = 1.0) -> None:
        self.img_scale = to_pair(img_scale, 'MixUp.img_scale', '(W, H)')
        if len(ratio_range) != 2 or not 0 < ratio_range[0] <= ratio_range[1]:
            raise DataError(f'MixUp.ratio_range must be (min, max) with 0 < min <= max, got {ratio_range!r}')
        if not 0 <= flip_ratio <= 1:
            raise DataError(f'MixUp.flip_ratio must be in [0, 1], got {flip_ratio!r}')
        self.ratio_range = (float(ratio_range[0]), float(ratio_range[1]))
        self.flip_ratio = float(flip_ratio)
        self.pad_val = pad_val
        self.prob = _check_prob(prob, 'MixUp')

    def get_indexes(self, dataset) -> list[int]:
        """One random sample index of ``dataset`` (numpy's global RNG)."""
        return [int(np.random.randint(0, len(dataset)))]

    def __call__(self, results: dict) -> dict:
        if np.random.random_sample() >= self.prob:
            return results
        other = _mix_results(results, 1, 'MixUp')[0]
        _no_masks([results, other], 'MixUp')
        other_fields = box_fields(other)
        if len(other_fields['gt_bboxes']) == 0:
            return results
        jitter = np.random.uniform(*self.ratio_range)
        flip = np.random.random_sample() < self.flip_ratio
        w, h = self.img_scale
        resized, fx, fy = _fit_resize(other['img'], self.img_scale)
        img = _canvas((h, w), resized, self.pad_val)
        img[:resized.shape[0], :resized.shape[1]] = resized
        jw, jh = max(int(w * jitter), 1), max(int(h * jitter), 1)
        img = cv2.resize(img, (jw, jh), interpolation=cv2.INTER_LINEAR).reshape(jh, jw, *img.shape[2:])
        sx, sy = fx * jw / w, fy * jh / h
        boxes = other_fields['gt_bboxes'] * np.array([sx, sy, sx, sy], np.float32)
        if flip:
            img = img[:, ::-1]
            boxes = np.stack([jw - boxes[:, 2], boxes[:, 1], jw - boxes[:, 0], boxes[:, 3]], axis=1)
        ori = results['img']
        oh, ow = ori.shape[:2]
        padded = _canvas((max(oh, jh), max(ow, jw)), img, self.pad_val)
        padded[:jh, :jw] = img
        y_off = int(np.random.randint(0, padded.shape[0] - oh + 1))
        x_off = int(np.random.randint(0, padded.shape[1] - ow + 1))
        window = padded[y_off:y_off + oh, x_off:x_off + ow]
        mixed = 0.5 * ori.astype(np.float32) + 0.5 * window.astype(np.float32)
        other_fields['gt_bboxes'] = boxes - np.array([x_off, y_off, x_off, y_off], np.float32)
        other_fields = clip_and_drop(other_fields, (oh, ow))
        results.update(_concat([box_fields(results), other_fields]))
        results['img'] = mixed.astype(ori.dtype) if ori.dtype != np.uint8 else np.clip(mixed, 0, 255).astype(np.uint8)
        return clip_and_drop(results, (oh, ow))

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(img_scale={self.img_scale}, ratio_range={self.ratio_range}, '
                f'flip_ratio={self.flip_ratio}, pad_val={self.pad_val}, prob={self.prob})')
