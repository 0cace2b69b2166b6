"""3D recognizer (I3D, R(2+1)D, ...): each view a [3, T, H, W] clip of a 3D backbone."""

from __future__ import annotations

import torch

from video.registry import MODELS

from .base import BaseRecognizer


@MODELS.register_module()
class Recognizer3D(BaseRecognizer):
    """Clips float [B, V, 3, T, H, W] -> backbone on [B*V, 3, T, H, W] -> head -> [B*V, C] -> views averaged in the
    head. Args: see :class:`BaseRecognizer`."""

    FORMAT_SHAPE = "NCTHW"

    def split_views(self, inputs: torch.Tensor) -> tuple[torch.Tensor, int, int]:
        if inputs.dim() != 6:
            raise ValueError(f"Recognizer3D: inputs must be [B, V, 3, T, H, W] (format_shape NCTHW), got "
                             f"{tuple(inputs.shape)}")
        return inputs.reshape(-1, *inputs.shape[2:]), 1, inputs.shape[1]
