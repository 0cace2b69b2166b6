"""The detector's batch assembly: the core image batching plus training-time batch augmentations."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import nn

from detection.models import batch_augments as _batch_augments  # noqa: F401  (registers BatchRandomResize)
from detection.registry import MODELS
from oars.models.data_preprocessor import ImageDataPreprocessor


@MODELS.register_module()
class DetDataPreprocessor(ImageDataPreprocessor):
    """uint8 [3, H, W] images + ``DetDataSample``s -> a normalised float batch on the model's device.

    Images are moved to the device, turned BGR->RGB if ``bgr_to_rgb``, normalised with ``mean``/``std``
    (None: no normalisation) and padded bottom/right with ``pad_value`` to the largest image, rounded up to a
    multiple of ``pad_size_divisor`` (the backbone's largest stride); samples get ``batch_input_shape`` and
    ``pad_shape`` (see :class:`oars.models.ImageDataPreprocessor`). Boxes need no change for bottom/right
    padding. In training only, ``batch_augments`` (configs of batch transforms such as ``BatchRandomResize``,
    each called as ``inputs, samples = aug(inputs, samples)``) run on the batch afterwards.
    """

    def __init__(
        self,
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
        bgr_to_rgb: bool = False,
        pad_size_divisor: int = 1,
        pad_value: float = 0,
        batch_augments: Sequence[dict | nn.Module] | None = None,
        non_blocking: bool = False,
    ) -> None:
        super().__init__(
            mean=mean,
            std=std,
            bgr_to_rgb=bgr_to_rgb,
            size_divisor=pad_size_divisor,
            pad_val=pad_value,
            non_blocking=non_blocking,
        )
        augments = [MODELS.build(a) if isinstance(a, dict) else a for a in (batch_augments or [])]
        for i, a in enumerate(augments):
            if not isinstance(a, nn.Module):
                raise TypeError(
                    f"DetDataPreprocessor.batch_augments[{i}] must be a config dict or an nn.Module "
                    f"(e.g. BatchRandomResize), got {type(a).__name__}"
                )
        # A ModuleList, so that state the augments keep (BatchRandomResize's size) moves and saves with the model.
        self.batch_augments = nn.ModuleList(augments) if augments else None

    def forward(self, data: dict, training: bool = False) -> dict[str, Any]:
        """``{'inputs': images, 'data_samples': samples or None}`` -> same keys, batched on the device."""
        out = super().forward(data, training)
        if training and self.batch_augments is not None:
            inputs, samples = out["inputs"], out["data_samples"]
            for augment in self.batch_augments:
                inputs, samples = augment(inputs, samples)
            out = dict(inputs=inputs, data_samples=samples)
        return out
