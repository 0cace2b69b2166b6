"""Batch assembly on the model's device, shared by every image task: normalise, pad and stack.

Why here: detection and segmentation (and any image task) need the same steps, in the same order,
with the same checks; task preprocessors subclass :class:`ImageDataPreprocessor` and add only what
is theirs (label-map padding, batch augmentations). Images arrive uint8 from the workers (4x less
shared memory than float) and become float on the device.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from mmengine.model import BaseDataPreprocessor

from oars.registry import MODELS


@MODELS.register_module()
class ImageDataPreprocessor(BaseDataPreprocessor):
    """[C, H, W] images (a list, as ``pseudo_collate`` gives, or a stacked [B, C, H, W] tensor) -> one float batch.

    Images are moved to the device first (so the float conversion and normalisation run there), turned
    BGR->RGB if ``bgr_to_rgb``, normalised with ``mean``/``std`` (None: no normalisation), and padded at
    the bottom/right with ``pad_val`` to the largest image in the batch, at least ``size`` (H, W), rounded
    up to a multiple of ``size_divisor``. Images of one shape are stacked and normalised in one op.
    Each data sample's metainfo gains ``batch_input_shape`` and ``pad_shape`` (the padded batch size), and
    ``img_shape``/``ori_shape`` (the unpadded size) when the pipeline did not set them.
    """

    def __init__(
        self,
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
        bgr_to_rgb: bool = False,
        size: Sequence[int] | None = None,
        size_divisor: int | None = None,
        pad_val: float = 0,
        non_blocking: bool = False,
    ) -> None:
        super().__init__(non_blocking)
        name = type(self).__name__
        if (mean is None) != (std is None):
            raise ValueError(f"{name}: give both mean and std or neither, got mean={mean}, std={std}")
        if mean is not None:
            if len(mean) not in (1, 3) or len(std) not in (1, 3):
                raise ValueError(f"{name}: mean and std need 1 or 3 values, got mean={list(mean)}, std={list(std)}")
            if any(s <= 0 for s in std):
                raise ValueError(f"{name}: std values must be > 0, got {list(std)}")
            self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1), persistent=False)
            self.register_buffer("std", torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1), persistent=False)
        else:
            self.mean = self.std = None
        if size is not None and (len(size) != 2 or min(size) < 1):
            raise ValueError(f"{name}: size must be (H, W) with positive values, got {size!r}")
        if size_divisor is not None and size_divisor < 1:
            raise ValueError(f"{name}: size_divisor must be >= 1, got {size_divisor}")
        self.bgr_to_rgb = bgr_to_rgb
        self.size = None if size is None else (int(size[0]), int(size[1]))
        self.size_divisor = size_divisor
        self.pad_val = pad_val

    def target_shape(self, shapes: Sequence[tuple[int, int]]) -> tuple[int, int]:
        """The padded batch size (H, W) for images of ``shapes``."""
        h = max(s[0] for s in shapes)
        w = max(s[1] for s in shapes)
        if self.size is not None:
            h, w = max(h, self.size[0]), max(w, self.size[1])
        if self.size_divisor:
            d = self.size_divisor
            h, w = math.ceil(h / d) * d, math.ceil(w / d) * d
        return h, w

    def _check_inputs(self, data: Any) -> tuple[list[torch.Tensor] | torch.Tensor, list | None]:
        name = type(self).__name__
        if not isinstance(data, dict) or "inputs" not in data:
            raise TypeError(f"{name} expects a dict with an 'inputs' key, got {type(data).__name__}")
        images = data["inputs"]
        if isinstance(images, torch.Tensor):
            if images.dim() != 4:
                raise ValueError(f"{name}: a stacked input must be [B, C, H, W], got {tuple(images.shape)}")
            checked = list(images)
        elif isinstance(images, Sequence) and len(images) > 0:
            checked = list(images)
        else:
            raise ValueError(f"{name}: 'inputs' must be a non-empty list of [C, H, W] tensors or a [B, C, H, W] "
                             f"tensor, got {type(images).__name__}")
        samples = data.get("data_samples")
        if samples is not None and len(samples) != len(checked):
            raise ValueError(f"{name}: {len(checked)} images but {len(samples)} data samples")
        channels = None if self.mean is None else self.mean.shape[1]
        need3 = channels == 3 or self.bgr_to_rgb
        for i, img in enumerate(checked):
            if not isinstance(img, torch.Tensor) or img.dim() != 3 or (need3 and img.shape[0] != 3):
                shape = tuple(img.shape) if isinstance(img, torch.Tensor) else type(img).__name__
                raise ValueError(f"{name}: image {i} has shape {shape}, expected [3, H, W] (channels first)")
        return images, samples

    def _normalise(self, batch: torch.Tensor) -> torch.Tensor:
        """uint8/float [B, C, H, W] -> float32, channels swapped and normalised (one op each for the batch)."""
        if self.bgr_to_rgb:
            batch = batch.flip(1)
        batch = batch.float()
        if self.mean is not None:
            batch = (batch - self.mean) / self.std
        return batch

    def stack_images(self, images: list[torch.Tensor] | torch.Tensor) -> tuple[torch.Tensor, list[tuple[int, int]]]:
        """Normalise and pad images (already on the device) into [B, C, H, W]; also return their (H, W)."""
        shapes = [tuple(int(s) for s in img.shape[-2:]) for img in images]
        h, w = self.target_shape(shapes)
        if isinstance(images, torch.Tensor) or len(set(shapes)) == 1:
            batch = self._normalise(images if isinstance(images, torch.Tensor) else torch.stack(list(images)))
            ih, iw = shapes[0]
            if (ih, iw) != (h, w):
                batch = F.pad(batch, (0, w - iw, 0, h - ih), value=float(self.pad_val))
            return batch, shapes
        # Mixed sizes: copy into a zero batch, normalise once, then write the padding value back over the borders.
        raw = images[0].new_zeros((len(images), images[0].shape[0], h, w))
        for i, (img, (ih, iw)) in enumerate(zip(images, shapes)):
            raw[i, :, :ih, :iw] = img
        batch = self._normalise(raw)
        for i, (ih, iw) in enumerate(shapes):
            batch[i, :, ih:, :] = self.pad_val
            batch[i, :, :ih, iw:] = self.pad_val
        return batch, shapes

    @staticmethod
    def set_batch_metainfo(samples: list | None, shapes: list[tuple[int, int]], batch_shape: tuple[int, int]) -> None:
        """``batch_input_shape``/``pad_shape`` = the batch's (H, W); ``img_shape``/``ori_shape`` when missing."""
        if samples is None:
            return
        for sample, shape in zip(samples, shapes):
            sample.set_metainfo(dict(batch_input_shape=batch_shape, pad_shape=batch_shape))
            if "img_shape" not in sample.metainfo:
                sample.set_metainfo(dict(img_shape=shape))
            if "ori_shape" not in sample.metainfo:
                sample.set_metainfo(dict(ori_shape=shape))

    def forward(self, data: dict, training: bool = False) -> dict[str, Any]:
        """``{'inputs': images, 'data_samples': samples or None}`` -> same keys, batched on the device."""
        data = self.cast_data(data)
        images, samples = self._check_inputs(data)
        batch, shapes = self.stack_images(images)
        self.set_batch_metainfo(samples, shapes, tuple(batch.shape[-2:]))
        return dict(inputs=batch, data_samples=samples)
