"""Small tensor helpers shared by segmentation heads and segmentors."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F


def resize(x: torch.Tensor, size: Sequence[int], align_corners: bool = False) -> torch.Tensor:
    """Bilinear resize of a [B, C, H, W] tensor to ``size`` (H, W); a no-op when it already has that size."""
    size = (int(size[0]), int(size[1]))
    if tuple(x.shape[-2:]) == size:
        return x
    return F.interpolate(x, size=size, mode="bilinear", align_corners=align_corners)
