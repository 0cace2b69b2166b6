"""Run albumentations on the results dict of a pipeline, keeping image, masks and boxes in sync.

Why one adapter: every geometric transform must move the image, the segmentation map and
(for detection) the boxes together. albumentations' ``Compose`` already does that; this module
is the single place that maps our results keys to its targets and back, and that makes its
randomness follow numpy's global RNG (albumentations 2.x seeds itself from OS entropy, which
would make ``randomness.seed`` useless).
"""

from __future__ import annotations

import difflib
import inspect
import random
from collections.abc import Callable, Sequence
from typing import Any

import albumentations as A
import cv2
import numpy as np
import torch
from torchvision.ops import remove_small_boxes

from oars.errors import DataError
from oars.registry import TRANSFORMS

# Instance masks: results['gt_masks'] is a uint8 0/1 array [N, H, W], one bitmap per box of gt_bboxes.
MASKS_KEY = 'gt_masks'

# results key -> albumentations target. Per-pixel targets only; boxes are handled below because
# they need BboxParams and labels.
RESULTS_TO_ALBU: dict[str, str] = {'img': 'image', 'gt_seg_map': 'mask', MASKS_KEY: 'masks'}

# Boxes: results['gt_bboxes'] is a float array [N, 4] (x1, y1, x2, y2 in pixels). albumentations
# may drop boxes (crops); we pass each box's index as a label and re-index the per-box keys below
# (instance masks too: albumentations transforms every mask but does not drop the dropped boxes' ones).
BOX_KEY = 'gt_bboxes'
BOX_ALIGNED_KEYS: tuple[str, ...] = ('gt_bboxes_labels', 'gt_ignore_flags', MASKS_KEY)

# A geometric op on instance masks given as a function: (masks uint8 [N, H, W], output image (H', W')) ->
# masks [N, H', W']. Named transforms pass one where albumentations would be slow (it resizes masks through
# 4-channel chunks) or wrong for instance masks (Pad fills masks with the label map's ignore value).
MasksFn = Callable[[np.ndarray, tuple[int, int]], np.ndarray]
_BOX_IDS = 'bbox_ids'

# One rule for degenerate boxes, wherever boxes move: after clipping to the image, a box narrower or
# shorter than MIN_BOX_SIZE pixels is dropped together with its label and ignore flag. albumentations
# applies it through BboxParams; transforms that move boxes themselves (Mosaic, crops) call valid_boxes.
MIN_BOX_SIZE = 1.0
# float32 round trips through albumentations' normalised coordinates move sizes by ~1e-4 px.
_BOX_SIZE_TOL = 1e-3


def valid_boxes(boxes: np.ndarray, min_size: float = MIN_BOX_SIZE) -> np.ndarray:
    """Boolean mask [N] of the (x1, y1, x2, y2) boxes at least ``min_size`` wide and high (the MIN_BOX_SIZE rule)."""
    boxes = torch.from_numpy(np.asarray(boxes, dtype=np.float32).reshape(-1, 4))
    keep = np.zeros(len(boxes), dtype=bool)
    keep[remove_small_boxes(boxes, min_size - _BOX_SIZE_TOL).numpy()] = True
    return keep


def _pixel_only(transform: A.BasicTransform | A.BaseCompose) -> bool:
    """Whether a transform (or every transform inside a compose) changes pixel values only."""
    if isinstance(transform, A.BaseCompose):
        return all(_pixel_only(t) for t in transform.transforms)
    return isinstance(transform, A.ImageOnlyTransform)


def build_compose(transforms: Sequence[A.BasicTransform | A.BaseCompose], with_boxes: bool) -> A.Compose:
    """An albumentations Compose; with BboxParams (pascal_voc, clipped, degenerate boxes dropped by the
    MIN_BOX_SIZE rule) when boxes will be passed."""
    min_size = MIN_BOX_SIZE - _BOX_SIZE_TOL
    # Pixel-only transforms (colour) leave boxes alone: no box processor, boxes are not passed at all.
    with_boxes = with_boxes and not all(_pixel_only(t) for t in transforms)
    bbox_params = (
        A.BboxParams(format='pascal_voc', label_fields=[_BOX_IDS], clip=True, min_width=min_size,
                     min_height=min_size) if with_boxes else None
    )
    return A.Compose(list(transforms), bbox_params=bbox_params)


def seed_from_numpy(compose: A.BaseCompose) -> None:
    """Reseed albumentations from numpy's global RNG, so mmengine's ``set_random_seed`` governs it.

    One generator pair is shared by all transforms of the compose. (``Compose.set_random_seed``
    would give every child its own generator with the same seed, so their draws, e.g. whether
    each p=0.5 step runs, would be identical and the steps would always fire together.)
    """
    seed = int(np.random.randint(2**31))
    compose.set_random_state(np.random.default_rng(seed), random.Random(seed))


def _instance_masks(results: dict) -> np.ndarray | None:
    """``results['gt_masks']`` as uint8 [N, H, W] (None when absent); ``DataError`` for another shape."""
    masks = results.get(MASKS_KEY)
    if masks is None:
        return None
    masks = np.asarray(masks)
    img = results['img']
    if masks.ndim != 3 or masks.shape[1:] != img.shape[:2]:
        raise DataError(f"{results.get('img_path', 'a sample')}: gt_masks must be [N, H, W] with the image's "
                        f'(H, W) = {tuple(img.shape[:2])}, got shape {tuple(masks.shape)}')
    return masks if masks.dtype == np.uint8 else masks.astype(np.uint8)


def run_albu(results: dict, compose: A.Compose, bgr_to_rgb: bool = False, masks_fn: MasksFn | None = None) -> dict:
    """Apply ``compose`` to the keys of ``results`` it knows; update ``img_shape``.

    ``bgr_to_rgb``: colour transforms of albumentations assume RGB while our images are BGR
    (OpenCV); when set, a 3-channel image is swapped to RGB for the call and back after.
    Instance masks (``gt_masks`` [N, H, W]) follow the boxes albumentations keeps. With ``masks_fn`` they are
    not given to albumentations: the kept ones are transformed by ``masks_fn(masks, new (H, W))`` after it.
    """
    if results.get('img') is None:
        raise KeyError("albumentations transforms need results['img']; put LoadImageFromFile first")
    masks = _instance_masks(results)
    data: dict[str, Any] = {t: results[k] for k, t in RESULTS_TO_ALBU.items()
                            if k != MASKS_KEY and results.get(k) is not None}
    # albumentations cannot stack an empty [0, H, W] set of masks; those are made at the new size below
    masks_to_albu = masks is not None and masks_fn is None and len(masks) > 0
    if masks_to_albu:
        data['masks'] = masks
    swap = bgr_to_rgb and data['image'].ndim == 3 and data['image'].shape[2] == 3
    if swap:
        data['image'] = np.ascontiguousarray(data['image'][..., ::-1])
    with_boxes = results.get(BOX_KEY) is not None and 'bboxes' in compose.processors
    if with_boxes:
        boxes = np.asarray(results[BOX_KEY], dtype=np.float32).reshape(-1, 4)
        data['bboxes'] = boxes
        data[_BOX_IDS] = np.arange(len(boxes))
    seed_from_numpy(compose)
    out = compose(**data)
    image = out['image']
    if swap:
        image = np.ascontiguousarray(image[..., ::-1])
    results['img'] = image
    for key, target in RESULTS_TO_ALBU.items():
        if key != 'img' and target in out:
            results[key] = out[target]
    if masks_to_albu:  # 0/1 whatever fill_mask a transform pads instance masks with (it also pads label maps)
        results[MASKS_KEY] = np.ascontiguousarray(out['masks'] == 1).view(np.uint8)
    if masks is not None and not masks_to_albu:
        results[MASKS_KEY] = masks
    if with_boxes:
        keep = np.asarray(out[_BOX_IDS], dtype=np.int64).reshape(-1)
        results[BOX_KEY] = np.asarray(out['bboxes'], dtype=np.float32).reshape(-1, 4)
        for key in BOX_ALIGNED_KEYS:
            if results.get(key) is not None:
                results[key] = np.asarray(results[key])[keep]
    shape = (int(image.shape[0]), int(image.shape[1]))
    if masks is not None and not masks_to_albu:
        kept = results[MASKS_KEY]
        results[MASKS_KEY] = (np.ascontiguousarray(masks_fn(kept, shape)) if masks_fn is not None
                              else np.zeros((0, *shape), dtype=np.uint8))
    results['img_shape'] = shape
    return results


def stack_mask_fn(mask_fn: Callable[[np.ndarray], np.ndarray]) -> MasksFn:
    """A ``MasksFn`` from a per-mask function: ``mask_fn`` on each [H, W] mask, stacked (any N, also 0)."""
    def apply(masks: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
        if len(masks) == 0:
            return np.zeros((0, *shape), dtype=np.uint8)
        return np.stack([mask_fn(np.ascontiguousarray(m)) for m in masks])

    return apply


def apply_pixel_fns(
    results: dict,
    image_fn: Callable[[np.ndarray], np.ndarray],
    mask_fn: Callable[[np.ndarray], np.ndarray],
    masks_fn: MasksFn | None = None,
) -> dict:
    """Apply a deterministic geometric op given as functions (``image_fn`` for the image, ``mask_fn``
    for label maps, ``masks_fn`` for instance masks, default ``mask_fn`` on each) to the per-pixel keys of
    ``results``, without building an albumentations Compose.

    For sample-dependent ops (resize to a drawn size, crop a drawn window) whose transform and Compose
    would otherwise be constructed per sample (~0.3 ms, many times the op itself). The functions are
    albumentations' functional API, so results equal the Compose path; outputs are made contiguous
    as albumentations does. No boxes: callers route samples with boxes through ``AlbuAdapter._apply``.
    """
    if results.get('img') is None:
        raise KeyError("albumentations transforms need results['img']; put LoadImageFromFile first")
    masks = _instance_masks(results)
    for key, target in RESULTS_TO_ALBU.items():
        value = results.get(key)
        if value is None or key == MASKS_KEY:
            continue
        if target == 'image':
            results[key] = np.ascontiguousarray(image_fn(np.ascontiguousarray(value)))
        elif target == 'mask':
            results[key] = np.ascontiguousarray(mask_fn(np.ascontiguousarray(value)))
        else:
            raise NotImplementedError(f'apply_pixel_fns: no function for albumentations target {target!r} ({key})')
    shape = (int(results['img'].shape[0]), int(results['img'].shape[1]))
    if masks is not None:
        results[MASKS_KEY] = np.ascontiguousarray((masks_fn or stack_mask_fn(mask_fn))(masks, shape))
    results['img_shape'] = shape
    return results


class AlbuAdapter:
    """Base of transforms that run on albumentations.

    Subclasses with fixed albumentations transforms implement ``_albu_transforms()`` and call
    ``self._apply(results)``; the Compose is built once per "with boxes or not" and cached.
    Subclasses whose albumentations parameters depend on the sample (sizes, crop windows) call
    ``self._apply_fns(results, image_fn, mask_fn, make_transform, masks_fn)``: the functional ops run
    directly on image and masks, and only a sample with boxes pays for ``make_transform()`` and a Compose
    (which converts, clips and drops boxes). ``masks_fn`` (optional) transforms instance masks in one
    vectorised op instead of albumentations' per-mask path.
    """

    bgr_to_rgb: bool = False

    def _albu_transforms(self) -> list[A.BasicTransform | A.BaseCompose]:
        raise NotImplementedError(f'{type(self).__name__} builds its albumentations transforms per call')

    def _apply(self, results: dict, transforms: Sequence[A.BasicTransform] | None = None,
               masks_fn: MasksFn | None = None) -> dict:
        with_boxes = results.get(BOX_KEY) is not None
        if transforms is None:
            cache = self.__dict__.setdefault('_compose_cache', {})
            if with_boxes not in cache:
                cache[with_boxes] = build_compose(self._albu_transforms(), with_boxes)
            compose = cache[with_boxes]
        else:
            compose = build_compose(transforms, with_boxes)
        return run_albu(results, compose, bgr_to_rgb=self.bgr_to_rgb, masks_fn=masks_fn)

    def _apply_fns(
        self,
        results: dict,
        image_fn: Callable[[np.ndarray], np.ndarray],
        mask_fn: Callable[[np.ndarray], np.ndarray],
        make_transform: Callable[[], A.BasicTransform],
        masks_fn: MasksFn | None = None,
    ) -> dict:
        if results.get(BOX_KEY) is not None:
            return self._apply(results, [make_transform()], masks_fn=masks_fn)
        return apply_pixel_fns(results, image_fn, mask_fn, masks_fn)


def _albu_class_names() -> list[str]:
    """Public albumentations transform and compose classes, by name."""
    bases = (A.BasicTransform, A.BaseCompose)
    return sorted(n for n, obj in vars(A).items() if inspect.isclass(obj) and issubclass(obj, bases))


def build_albu_transform(cfg: dict | A.BasicTransform | A.BaseCompose) -> A.BasicTransform | A.BaseCompose:
    """Build an albumentations transform from ``{'type': 'HorizontalFlip', 'p': 0.5}``.

    Composes (``OneOf``, ``SomeOf``, ``Sequential``...) build their ``transforms`` recursively.
    """
    if isinstance(cfg, (A.BasicTransform, A.BaseCompose)):
        return cfg
    if not isinstance(cfg, dict) or 'type' not in cfg:
        raise TypeError(f"an albumentations transform must be a dict with a 'type' key, got {cfg!r}")
    kwargs = dict(cfg)
    name = kwargs.pop('type')
    names = _albu_class_names()
    if name not in names:
        close = difflib.get_close_matches(str(name), names, n=5, cutoff=0.5)
        hint = f'; closest names: {", ".join(close)}' if close else ''
        raise DataError(f'{name!r} is not an albumentations transform{hint}')
    cls: Callable[..., Any] = getattr(A, name)
    if issubclass(cls, A.BaseCompose) and 'transforms' in kwargs:
        kwargs['transforms'] = [build_albu_transform(c) for c in kwargs['transforms']]
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise DataError(f'could not build albumentations.{name} with {kwargs}: {e}') from e


@TRANSFORMS.register_module()
class Albu(AlbuAdapter):
    """Any albumentations transforms, by name: ``Albu(transforms=[{type: HorizontalFlip, p: 0.5}])``.

    ``bgr_to_rgb`` (default True) hands albumentations an RGB image, which its colour transforms
    assume; turn it off for purely geometric lists to save two channel swaps.
    """

    def __init__(self, transforms: Sequence[dict], bgr_to_rgb: bool = True) -> None:
        if not transforms:
            raise DataError('Albu needs a non-empty list of albumentations transforms')
        self.transforms_cfg = [dict(t) if isinstance(t, dict) else t for t in transforms]
        self.bgr_to_rgb = bgr_to_rgb
        self._albu_transforms()  # fail at build time on a bad name or argument

    def _albu_transforms(self) -> list[A.BasicTransform | A.BaseCompose]:
        return [build_albu_transform(c) for c in self.transforms_cfg]

    def __call__(self, results: dict) -> dict:
        return self._apply(results)

    def __repr__(self) -> str:
        return f'{type(self).__name__}(transforms={self.transforms_cfg}, bgr_to_rgb={self.bgr_to_rgb})'


# Interpolation flags used by the named transforms: images bilinear, label maps nearest.
IMG_INTERP = cv2.INTER_LINEAR
MASK_INTERP = cv2.INTER_NEAREST
