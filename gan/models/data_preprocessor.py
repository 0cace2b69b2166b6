"""Batch assembly of GAN samples on the model's device: stack each image key and map 0..255 -> [-1, 1].

Why here: the workers deliver uint8 images (4x less shared memory than float); the float conversion runs once per
batch on the device. The normalisation is the image tasks' own (:class:`oars.models.ImageDataPreprocessor` with
mean = std = 127.5, i.e. ``x / 127.5 - 1``), so every task normalises with the same code. GAN batches are never
padded: every image of one key must have the same size (the pipelines resize/crop to a fixed size).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from gan.registry import MODELS
from oars.models.data_preprocessor import ImageDataPreprocessor

IMAGE_KEYS = ("img", "img_A", "img_B")


@MODELS.register_module()
class GANDataPreprocessor(ImageDataPreprocessor):
    """``{'inputs': {key: list of B tensors}, 'data_samples': list}`` -> ``{'inputs': {key: batch}, ...}``.

    Image keys (``img``, ``img_A``, ``img_B``): B uint8 (or float 0..255) [C, H, W] tensors, or a stacked
    [B, C, H, W] tensor -> float32 [B, C, H, W] in [-1, 1]. ``label``: B int scalars -> int64 [B]. ``attrs``: B
    float [K] -> float32 [B, K]. Any other key is stacked as given (tensors) or left as a list. ``noise`` (a tensor
    [B, Z], for a caller that supplies its own) passes through unchanged.

    Args:
        mean, std: the 0..255 normalisation; the defaults give ``x / 127.5 - 1``.
        bgr_to_rgb: flip channels (the contract delivers RGB already, so False).
    """

    def __init__(self, mean: Sequence[float] = (127.5,), std: Sequence[float] = (127.5,), bgr_to_rgb: bool = False,
                 non_blocking: bool = False) -> None:
        super().__init__(mean=mean, std=std, bgr_to_rgb=bgr_to_rgb, non_blocking=non_blocking)

    def forward(self, data: dict, training: bool = False) -> dict[str, Any]:
        """Batch every key of ``data['inputs']`` on the device (see the class docstring)."""
        if not isinstance(data, dict) or not isinstance(data.get("inputs"), Mapping):
            got = type(data.get("inputs")).__name__ if isinstance(data, dict) else type(data).__name__
            raise TypeError(f"GANDataPreprocessor expects {{'inputs': {{key: tensors}}, 'data_samples': [...]}}, "
                            f"got inputs of type {got}")
        data = self.cast_data(data)
        samples = data.get("data_samples")
        out = {}
        for key, value in data["inputs"].items():
            if key in IMAGE_KEYS:
                out[key] = self.stack_key(key, value)
            elif key == "label":
                out[key] = self._stack_values(key, value).long().reshape(-1)
            elif key == "attrs":
                out[key] = self._stack_values(key, value).float()
            elif key == "noise" and isinstance(value, torch.Tensor):
                out[key] = value
            elif isinstance(value, Sequence) and value and all(isinstance(v, torch.Tensor) for v in value):
                out[key] = self._stack_values(key, value)
            else:
                out[key] = value
        if samples is not None:
            sizes = {k: v.shape[0] for k, v in out.items() if isinstance(v, torch.Tensor) and k != "noise"}
            for key, size in sizes.items():
                if size != len(samples):
                    raise ValueError(f"GANDataPreprocessor: inputs['{key}'] holds {size} items but there are "
                                     f"{len(samples)} data samples")
        return dict(inputs=out, data_samples=samples)

    def stack_key(self, key: str, images: Sequence[torch.Tensor] | torch.Tensor) -> torch.Tensor:
        """B images [C, H, W] of one key (or [B, C, H, W]) -> float32 [B, C, H, W] in [-1, 1]."""
        if isinstance(images, torch.Tensor):
            if images.dim() != 4:
                raise ValueError(f"GANDataPreprocessor: inputs['{key}'] as a tensor must be [B, C, H, W], "
                                 f"got {tuple(images.shape)}")
            return self._normalise(images)
        if not isinstance(images, Sequence) or len(images) == 0:
            raise ValueError(f"GANDataPreprocessor: inputs['{key}'] must be a non-empty list of [C, H, W] tensors, "
                             f"got {type(images).__name__}")
        shapes = [tuple(img.shape) if isinstance(img, torch.Tensor) else type(img).__name__ for img in images]
        for i, shape in enumerate(shapes):
            if not isinstance(shape, tuple) or len(shape) != 3:
                raise ValueError(f"GANDataPreprocessor: inputs['{key}'][{i}] has shape {shape}, expected [C, H, W]")
        if len(set(shapes)) != 1:
            raise ValueError(f"GANDataPreprocessor: inputs['{key}'] images differ in shape {sorted(set(shapes))}; "
                             "a GAN pipeline must resize/crop every image to one size (no padding)")
        return self._normalise(torch.stack(list(images)))

    @staticmethod
    def _stack_values(key: str, values: Sequence | torch.Tensor) -> torch.Tensor:
        if isinstance(values, torch.Tensor):
            return values
        try:
            return torch.stack([torch.as_tensor(v) for v in values])
        except (RuntimeError, TypeError) as exc:
            raise ValueError(f"GANDataPreprocessor: cannot stack inputs['{key}'] ({exc})") from exc

    def destruct(self, batch: torch.Tensor) -> torch.Tensor:
        """Generator output [B, C, H, W] in [-1, 1] -> float32 0..255 (clamped): the inverse of the normalisation."""
        batch = batch.float()
        if batch.dim() == 3:
            return self.destruct(batch[None])[0]
        if self.mean is not None:
            batch = batch * self.std.to(batch.device) + self.mean.to(batch.device)
        if self.bgr_to_rgb:
            batch = batch.flip(1)
        return batch.clamp(0.0, 255.0)
