"""Class-aware sampling: draw training images so that rare classes are seen about as often as common ones.

Two rules (``mode``):

- ``paddle`` (PaddleDetection's ``_calc_img_weights``, the sampling of CACascade R-CNN): image ``i`` gets the
  weight ``w_i = sum over the classes c present in i of 1 / n_c``, ``n_c`` the number of images containing
  ``c``; an epoch draws ``len(dataset)`` images with replacement with probabilities ``w / sum(w)``. Every class
  then gets the same expected number of (image, class) draws; an image with many classes is drawn more often.
- ``mmdet`` (MMDetection's ``ClassAwareSampler`` idea): each draw picks a class uniformly among the classes
  present, then an image containing it uniformly. Every class gets the same expected number of draws whatever
  else its images contain. (MMDetection cycles through shuffled per-class lists; here both picks are independent
  draws with replacement.)

Images without any class (no annotated object, or a label map of background only where the dataset reports no
class) are never drawn in either mode (weight 0); a warning says how many there are.

The class ids of each image come from the dataset's ``get_cat_ids(idx)`` (the task's datasets implement it),
read once when the sampler is built. Draws are a function of ``seed + epoch`` only (``set_epoch``), so runs
are reproducible and a resumed run draws the same order; every rank computes the same global draw and takes
``draw[rank::world_size]``, so the ranks split it without overlap. ``skip(n)`` (mmengine's fast-forward
contract) restarts mid-stream: with ``infinite: false`` at sample ``n`` of the current epoch, with
``infinite: true`` (iteration-based loops, like ``InfiniteSampler``) at absolute per-rank position ``n`` of the
endless stream of epochs 0, 1, 2, ...
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from mmengine.dist import get_dist_info, sync_random_seed
from torch.utils.data import Sampler

from oars.errors import DataError
from oars.registry import DATA_SAMPLERS

MODES = ("paddle", "mmdet")


class NoClassImageWarning(UserWarning):
    """Some images contain no class, so class-aware sampling never draws them."""


def image_class_pairs(cat_ids: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (image, class) pairs of per-image class-id lists: ``(image_idx [P], class_id [P])`` int64,
    sorted by image then class (an image listing a class twice counts it once)."""
    lengths = np.fromiter((len(c) for c in cat_ids), dtype=np.int64, count=len(cat_ids))
    image_idx = np.repeat(np.arange(len(cat_ids), dtype=np.int64), lengths)
    flat = [np.asarray(c, dtype=np.int64).ravel() for c in cat_ids if len(c)]
    class_id = np.concatenate(flat) if flat else np.zeros((0,), np.int64)
    if class_id.size and class_id.min() < 0:
        raise DataError(f"ClassAwareSampler: class ids must be >= 0, got {int(class_id.min())}")
    span = int(class_id.max(initial=0)) + 1
    key = np.unique(image_idx * span + class_id)
    return key // span, key % span


def class_aware_weights(cat_ids: Sequence[Sequence[int]]) -> np.ndarray:
    """PaddleDetection's image weights (unnormalised): ``w_i = sum_{c in i} 1 / n_c``, float64 ``[N]``, 0 for an
    image without classes."""
    image_idx, class_id = image_class_pairs(cat_ids)
    _, inverse, per_class = np.unique(class_id, return_inverse=True, return_counts=True)
    return np.bincount(image_idx, weights=1.0 / per_class[inverse], minlength=len(cat_ids))


def _read_cat_ids(dataset: Any) -> list[Sequence[int]]:
    get = getattr(dataset, "get_cat_ids", None)
    if not callable(get):
        raise DataError(f"ClassAwareSampler: the dataset {type(dataset).__name__} has no get_cat_ids(idx) (the class "
                        "ids present in an image), which class-aware sampling reads; use a dataset that has it (the "
                        "built-in tasks' datasets do) or another sampler")
    return [get(i) for i in range(len(dataset))]


@DATA_SAMPLERS.register_module()
class ClassAwareSampler(Sampler[int]):
    """Class-aware sampling (the rules and the resume contract are in the module docstring).

    Args:
        dataset: a dataset with ``get_cat_ids(idx)``; read once here.
        mode: ``'paddle'`` (default) or ``'mmdet'``.
        seed: the draws' seed (None: a random seed shared by the ranks, as mmengine's samplers).
        infinite: an endless stream of epochs for iteration-based loops (``skip`` then counts from the start of
            the run); False: one epoch per iteration, chosen by ``set_epoch``.

    Raises:
        DataError: an unknown mode, a dataset without ``get_cat_ids``, or no image with a class.
    """

    def __init__(self, dataset: Any, mode: str = "paddle", seed: int | None = None, infinite: bool = False) -> None:
        if mode not in MODES:
            raise DataError(f"ClassAwareSampler: mode={mode!r} is not supported; accepted: {list(MODES)}")
        self.mode = mode
        self.infinite = bool(infinite)
        self.seed = sync_random_seed() if seed is None else int(seed)
        self.rank, self.world_size = get_dist_info()
        self.num_images = len(dataset)
        cat_ids = _read_cat_ids(dataset)
        image_idx, class_id = image_class_pairs(cat_ids)
        self.weights = class_aware_weights(cat_ids)
        if not (self.weights > 0).any():
            raise DataError(f"ClassAwareSampler: none of the {self.num_images} images of {type(dataset).__name__} "
                            "contains a class (get_cat_ids is empty for all); nothing to sample")
        empty = int((self.weights == 0).sum())
        if empty:
            warnings.warn(f"ClassAwareSampler: {empty} of {self.num_images} images contain no class and are never "
                          "drawn (weight 0)", NoClassImageWarning, stacklevel=2)
        # mmdet mode: the images of each class, contiguous, and where each class's run starts
        order = np.argsort(class_id, kind="stable")
        self._class_images = image_idx[order]
        _, self._class_count = np.unique(class_id, return_counts=True)
        self._class_start = np.concatenate([[0], np.cumsum(self._class_count)[:-1]])
        self.num_samples = math.ceil(self.num_images / self.world_size)  # per rank
        self.total_size = self.num_samples * self.world_size
        self.epoch = 0
        self._skip = 0

    def global_draw(self, epoch: int) -> np.ndarray:
        """Every rank's indices of ``epoch``: int64 ``[total_size]``, a function of ``seed + epoch`` only."""
        rng = np.random.default_rng(self.seed + epoch)
        if self.mode == "paddle":
            return rng.choice(self.num_images, size=self.total_size, replace=True, p=self.weights / self.weights.sum())
        cls = rng.integers(len(self._class_count), size=self.total_size)
        pos = np.minimum((rng.random(self.total_size) * self._class_count[cls]).astype(np.int64),
                         self._class_count[cls] - 1)
        return self._class_images[self._class_start[cls] + pos]

    def _epoch_of_rank(self, epoch: int) -> np.ndarray:
        return self.global_draw(epoch)[self.rank:: self.world_size]

    def __iter__(self) -> Iterator[int]:
        skip, self._skip = self._skip, 0
        if not self.infinite:
            yield from (int(i) for i in self._epoch_of_rank(self.epoch)[skip:])
            return
        epoch, offset = divmod(skip, self.num_samples)
        while True:
            yield from (int(i) for i in self._epoch_of_rank(epoch)[offset:])
            epoch, offset = epoch + 1, 0

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Draw epoch ``epoch`` next (mmengine's loops call this; no effect with ``infinite``, whose stream
        counts its own epochs)."""
        self.epoch = int(epoch)

    def skip(self, num_samples: int) -> None:
        """Start the next iteration at per-rank position ``num_samples`` (mmengine's resume fast-forward; no data
        is loaded): within the current epoch, or (``infinite``) from the start of the stream.

        Raises:
            ValueError: a negative count, or one beyond the epoch without ``infinite``.
        """
        if num_samples < 0 or (not self.infinite and num_samples > self.num_samples):
            raise ValueError(f"ClassAwareSampler.skip({num_samples}): expected 0..{self.num_samples} samples of the "
                             "epoch; iteration-based loops need ClassAwareSampler(infinite=True)")
        self._skip = int(num_samples)
