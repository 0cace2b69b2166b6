"""GAN pipeline transforms: loading (RGB), geometric transforms that keep paired images aligned, and packing.

Why RGB here (the detection/segmentation pipelines keep OpenCV's BGR): generators are trained and sampled in RGB,
the contract's image keys are RGB, and pictures and FID/IS feature extractors expect RGB, so the one swap happens
at loading. Image keys: ``img`` (one image), ``img_A`` / ``img_B`` (two domains); their files are in
``img_path`` / ``img_A_path`` / ``img_B_path``. Pixels stay uint8 H x W x C (H x W for grey) until
``PackGANInputs``; the data preprocessor normalises on the device.

Geometric transforms run on albumentations. With ``paired=True`` (the default) all keys go through one
``Compose`` call with ``additional_targets``, so they get the same resize, crop window and flip (Pix2Pix's A and
B stay pixel-aligned); with ``paired=False`` each key is transformed on its own (CycleGAN's unrelated domains).
Randomness follows numpy's global RNG (``oars.data.transforms.albu.seed_from_numpy``), as every oars pipeline.
"""

from __future__ import annotations

from collections.abc import Sequence

import albumentations as A
import cv2
import numpy as np
import torch

from gan.registry import TRANSFORMS
from gan.structures import GANDataSample
from oars.data.transforms.albu import build_albu_transform, seed_from_numpy
from oars.data.transforms.loading import read_image
from oars.errors import DataError

IMAGE_KEYS: tuple[str, ...] = ('img', 'img_A', 'img_B')
INTERPOLATIONS = {'nearest': cv2.INTER_NEAREST, 'bilinear': cv2.INTER_LINEAR, 'bicubic': cv2.INTER_CUBIC,
                  'area': cv2.INTER_AREA, 'lanczos': cv2.INTER_LANCZOS4}


def path_key(key: str) -> str:
    """Where the file of image key ``key`` is named: ``img`` -> ``img_path``, ``img_A`` -> ``img_A_path``."""
    return f'{key}_path'


def _file(results: dict, key: str) -> str:
    return str(results.get(path_key(key)) or results.get('img_path') or 'a sample')


def _check_keys(owner: str, keys: Sequence[str]) -> tuple[str, ...]:
    keys = (keys,) if isinstance(keys, str) else tuple(keys)
    bad = [k for k in keys if k not in IMAGE_KEYS]
    if not keys or bad:
        raise DataError(f'{owner}: keys must be a non-empty list of image keys {list(IMAGE_KEYS)}, got {list(keys)}')
    return keys


def _to_rgb(img: np.ndarray) -> np.ndarray:
    return img if img.ndim == 2 else cv2.cvtColor(img, cv2.COLOR_BGR2RGB)


@TRANSFORMS.register_module()
class LoadGANImageFromFile:
    """Read the file of each key (``img_path`` for ``img``, ``img_A_path`` for ``img_A``, ...) with OpenCV
    under the oars EXIF rule; ``results[key]`` = uint8 H x W x 3 RGB (``color_type: color``) or H x W
    (``grayscale``); ``<key>_ori_shape`` and, for the first key, ``img_shape`` / ``ori_shape``.

    A palette PNG is read as its colours (what a Pix2Pix labels -> photo model takes as input).
    Raises ``DataError`` / ``DataFileNotFoundError`` naming the file; a missing path key is a ``DataError``.
    """

    def __init__(self, keys: Sequence[str] = ('img',), color_type: str = 'color') -> None:
        self.keys = _check_keys('LoadGANImageFromFile', keys)
        if color_type not in ('color', 'grayscale'):
            raise DataError(f"LoadGANImageFromFile: color_type must be 'color' or 'grayscale', got {color_type!r}")
        self.color_type = color_type

    def __call__(self, results: dict) -> dict:
        for i, key in enumerate(self.keys):
            path = results.get(path_key(key))
            if path is None:
                raise DataError(f"LoadGANImageFromFile: results have no '{path_key(key)}' for key {key!r} "
                                f"(keys present: {sorted(results)})")
            img = _to_rgb(read_image(path, self.color_type))
            results[key] = img
            results[f'{key}_ori_shape'] = img.shape[:2]
            if i == 0:
                results['img_shape'] = results['ori_shape'] = img.shape[:2]
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}(keys={list(self.keys)}, color_type={self.color_type!r})'


@TRANSFORMS.register_module()
class LoadPairedImageFromFile:
    """Split a side-by-side file (``img_path``: A left, B right, as the pix2pix sets ship) into ``img_A`` and
    ``img_B`` (uint8 RGB H x W/2 x 3 each); ``pair_order: BA`` (``direction: BtoA``) swaps them.

    Raises ``DataError`` naming the file when its width is odd (the halves would not be aligned).
    """

    def __init__(self, color_type: str = 'color') -> None:
        if color_type not in ('color', 'grayscale'):
            raise DataError(f"LoadPairedImageFromFile: color_type must be 'color' or 'grayscale', got {color_type!r}")
        self.color_type = color_type

    def __call__(self, results: dict) -> dict:
        path = results.get('img_path')
        if path is None:
            raise DataError(f"LoadPairedImageFromFile: results have no 'img_path' (keys: {sorted(results)})")
        img = _to_rgb(read_image(path, self.color_type))
        h, w = img.shape[:2]
        if w % 2:
            raise DataError(f'{path}: a side-by-side A|B image must have an even width, got {w} x {h} (W x H)')
        halves = [np.ascontiguousarray(img[:, : w // 2]), np.ascontiguousarray(img[:, w // 2:])]
        if results.get('pair_order', 'AB') == 'BA':
            halves.reverse()
        results['img_A'], results['img_B'] = halves
        results['img_A_path'] = results['img_B_path'] = path
        results['img_A_ori_shape'] = results['img_B_ori_shape'] = (h, w // 2)
        results['img_shape'] = results['ori_shape'] = (h, w // 2)
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}(color_type={self.color_type!r})'


def check_same_size(owner: str, results: dict, keys: Sequence[str]) -> None:
    """``DataError`` naming every key's file and size unless all ``keys`` hold images of one (H, W)."""
    shapes = {k: tuple(results[k].shape[:2]) for k in keys}
    if len(set(shapes.values())) > 1:
        listed = ', '.join(f'{k} {_file(results, k)} is {s[1]} x {s[0]}' for k, s in shapes.items())
        raise DataError(f'{owner}: paired images must have the same size (W x H): {listed}')


@TRANSFORMS.register_module()
class GANAlbu:
    """albumentations transforms by name, applied to image ``keys`` (see the module docstring for ``paired``).

    Example: ``{type: GANAlbu, keys: [img_A, img_B], transforms: [{type: Resize, height: 286, width: 286},
    {type: RandomCrop, height: 256, width: 256}, {type: HorizontalFlip, p: 0.5}]}``. Paired images of different
    sizes are an error naming both files and sizes (a resize would hide the misalignment).
    """

    def __init__(self, keys: Sequence[str] = ('img',), transforms: Sequence[dict] = (), paired: bool = True) -> None:
        self.keys = _check_keys(type(self).__name__, keys)
        self.paired = bool(paired)
        self.transforms_cfg = [dict(t) if isinstance(t, dict) else t for t in transforms]
        albu = self._albu_transforms()
        if not albu:
            raise DataError(f'{type(self).__name__} needs a non-empty list of albumentations transforms')
        extra = {k: 'image' for k in self.keys[1:]} if self.paired else {}
        self.compose = A.Compose(albu, additional_targets=extra)

    def _albu_transforms(self) -> list[A.BasicTransform | A.BaseCompose]:
        return [build_albu_transform(c) for c in self.transforms_cfg]

    def __call__(self, results: dict) -> dict:
        owner = type(self).__name__
        missing = [k for k in self.keys if results.get(k) is None]
        if missing:
            raise DataError(f'{owner}: results have no image for key(s) {missing} ({_file(results, self.keys[0])});'
                            f' put LoadGANImageFromFile / LoadPairedImageFromFile first')
        if self.paired and len(self.keys) > 1:
            check_same_size(owner, results, self.keys)
            seed_from_numpy(self.compose)
            out = self.compose(image=results[self.keys[0]], **{k: results[k] for k in self.keys[1:]})
            results[self.keys[0]] = out['image']
            for k in self.keys[1:]:
                results[k] = out[k]
        else:
            for k in self.keys:
                seed_from_numpy(self.compose)
                results[k] = self.compose(image=results[k])['image']
        results['img_shape'] = tuple(int(s) for s in results[self.keys[0]].shape[:2])
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}(keys={list(self.keys)}, transforms={self.transforms_cfg}, paired={self.paired})'


def _size(owner: str, name: str, value: int | Sequence[int]) -> tuple[int, int]:
    """``value`` (int or (H, W)) as positive (H, W)."""
    hw = (value, value) if isinstance(value, int) and not isinstance(value, bool) else tuple(value)
    if len(hw) != 2 or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in hw):
        raise DataError(f'{owner}: {name} must be a positive int or [height, width], got {value!r}')
    return int(hw[0]), int(hw[1])


@TRANSFORMS.register_module()
class GANResize(GANAlbu):
    """Resize every key to ``scale`` (int or [H, W]) with ``interpolation`` (pix2pix: bicubic)."""

    def __init__(self, keys: Sequence[str] = ('img',), scale: int | Sequence[int] = 256,
                 interpolation: str = 'bicubic', paired: bool = True) -> None:
        if interpolation not in INTERPOLATIONS:
            raise DataError(f'GANResize: interpolation must be one of {list(INTERPOLATIONS)}, got {interpolation!r}')
        self.size = _size('GANResize', 'scale', scale)
        self.interpolation = interpolation
        super().__init__(keys, [{'type': 'Resize', 'height': self.size[0], 'width': self.size[1],
                                 'interpolation': INTERPOLATIONS[interpolation]}], paired)


@TRANSFORMS.register_module()
class GANRandomCrop(GANAlbu):
    """A random ``crop_size`` window (int or [H, W]), the same one for every key when ``paired``.

    An image smaller than the window is an error naming its file (resize first).
    """

    def __init__(self, keys: Sequence[str] = ('img',), crop_size: int | Sequence[int] = 256,
                 paired: bool = True) -> None:
        self.size = _size('GANRandomCrop', 'crop_size', crop_size)
        super().__init__(keys, [{'type': 'RandomCrop', 'height': self.size[0], 'width': self.size[1]}], paired)

    def __call__(self, results: dict) -> dict:
        for k in self.keys:
            img = results.get(k)
            if img is not None and (img.shape[0] < self.size[0] or img.shape[1] < self.size[1]):
                raise DataError(f'GANRandomCrop: {k} of {_file(results, k)} is {img.shape[1]} x {img.shape[0]} '
                                f'(W x H), smaller than the crop {self.size[1]} x {self.size[0]}; resize first')
        return super().__call__(results)


@TRANSFORMS.register_module()
class GANCenterCrop(GANAlbu):
    """The central ``crop_size`` window (int or [H, W]); StarGAN crops CelebA's 178 x 218 faces to 178."""

    def __init__(self, keys: Sequence[str] = ('img',), crop_size: int | Sequence[int] = 178,
                 paired: bool = True) -> None:
        self.size = _size('GANCenterCrop', 'crop_size', crop_size)
        super().__init__(keys, [{'type': 'CenterCrop', 'height': self.size[0], 'width': self.size[1],
                                 'pad_if_needed': False}], paired)


@TRANSFORMS.register_module()
class GANFlip(GANAlbu):
    """Flip with probability ``prob``: ``horizontal`` (the GAN default) or ``vertical``; when ``paired``,
    every key is flipped or none is."""

    def __init__(self, keys: Sequence[str] = ('img',), prob: float = 0.5, direction: str = 'horizontal',
                 paired: bool = True) -> None:
        flips = {'horizontal': 'HorizontalFlip', 'vertical': 'VerticalFlip'}
        if direction not in flips:
            raise DataError(f'GANFlip: direction must be one of {list(flips)}, got {direction!r}')
        if not 0.0 <= float(prob) <= 1.0:
            raise DataError(f'GANFlip: prob must be in [0, 1], got {prob!r}')
        super().__init__(keys, [{'type': flips[direction], 'p': float(prob)}], paired)


DEFAULT_META_KEYS: tuple[str, ...] = ('img_path', 'img_path_B', 'ori_shape', 'img_shape', 'sample_idx', 'attr_names')


@TRANSFORMS.register_module()
class PackGANInputs:
    """The last pipeline step: ``{'inputs': {key: tensor}, 'data_samples': GANDataSample}`` (the gan contract).

    ``keys``: what the model takes. Image keys -> uint8 [C, H, W] (C = 3 RGB, 1 for grey); ``label`` -> int64
    scalar; ``attrs`` -> float32 [K]; any other key -> ``torch.as_tensor`` of it. A missing key is a
    ``DataError`` naming it and the file. ``meta_keys`` present in the results go to the sample's metainfo;
    ``img_path`` falls back to ``img_A_path`` and ``img_path_B`` is ``img_B_path`` (when it names another file).
    """

    def __init__(self, keys: Sequence[str] = ('img',), meta_keys: Sequence[str] = DEFAULT_META_KEYS) -> None:
        self.keys = (keys,) if isinstance(keys, str) else tuple(keys)
        if not self.keys:
            raise DataError('PackGANInputs: keys must name at least one input (img, img_A, img_B, label, attrs)')
        self.meta_keys = (meta_keys,) if isinstance(meta_keys, str) else tuple(meta_keys)

    @staticmethod
    def _image(key: str, img: np.ndarray, results: dict) -> torch.Tensor:
        img = np.asarray(img)
        if img.dtype != np.uint8 or img.ndim not in (2, 3):
            raise DataError(f'PackGANInputs: {key} of {_file(results, key)} must be uint8 H x W (x C), got '
                            f'{img.dtype} {tuple(img.shape)}')
        img = img[..., None] if img.ndim == 2 else img
        return torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1)))

    def __call__(self, results: dict) -> dict:
        inputs = {}
        for key in self.keys:
            if results.get(key) is None:
                raise DataError(f"PackGANInputs: no '{key}' in the results of {_file(results, 'img')} "
                                f'(keys present: {sorted(results)})')
            value = results[key]
            if key in IMAGE_KEYS:
                inputs[key] = self._image(key, value, results)
            elif key == 'label':
                inputs[key] = torch.as_tensor(int(value), dtype=torch.int64)
            elif key == 'attrs':
                inputs[key] = torch.as_tensor(np.asarray(value, dtype=np.float32))
            else:
                inputs[key] = torch.as_tensor(value)
        meta = dict(results)
        if meta.get('img_path') is None and meta.get('img_A_path') is not None:
            meta['img_path'] = meta['img_A_path']
        if meta.get('img_B_path') is not None and meta['img_B_path'] != meta.get('img_path'):
            meta['img_path_B'] = meta['img_B_path']
        sample = GANDataSample(metainfo={k: meta[k] for k in self.meta_keys if meta.get(k) is not None})
        return {'inputs': inputs, 'data_samples': sample}

    def __repr__(self) -> str:
        return f'{type(self).__name__}(keys={list(self.keys)}, meta_keys={list(self.meta_keys)})'
