"""PSPNet head (Zhao et al. 2017): a pyramid pooling module over the deepest feature, then a 3x3 bottleneck."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from oars.models.layers import ConvNormAct
from segmentation.registry import MODELS

from ..utils import resize
from .decode_head import BaseDecodeHead


class PyramidPoolingModule(nn.ModuleList):
    """One branch per bin count ``s``: AdaptiveAvgPool2d(s) -> 1x1 ConvNormAct(in -> channels) -> bilinear
    upsampling back to the input size.

    The adaptive pools split the map into s x s (near-)equal cells, so each branch summarises the scene at
    one scale (global context for s=1, quadrants for s=2, ...); the output is the list of branch maps,
    each [B, channels, H, W] float, for the caller to concatenate with the input.
    """

    def __init__(
        self, in_channels: int, channels: int, pool_scales: Sequence[int], norm: Any = "BN", align_corners: bool = False
    ) -> None:
        super().__init__(
            nn.Sequential(nn.AdaptiveAvgPool2d(s), ConvNormAct(in_channels, channels, 1, norm=norm))
            for s in pool_scales
        )
        self.align_corners = align_corners

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        """[B, in_channels, H, W] -> ``len(pool_scales)`` maps [B, channels, H, W]."""
        size = x.shape[-2:]
        return [resize(branch(x), size, self.align_corners) for branch in self]


@MODELS.register_module()
class PSPHead(BaseDecodeHead):
    """PSPNet: pyramid pooling (bins ``pool_scales``) concatenated with the input feature, a 3x3 ConvNormAct
    bottleneck to ``channels``, dropout and the 1x1 classifier.

    mmseg's ``pspnet_r50-d8`` layout: ``in_index=3`` (ResNet stage 4, 2048 ch at output stride 8),
    ``channels=512``, bins (1, 2, 3, 6), dropout 0.1 - the bottleneck sees 2048 + 4 * 512 channels.
    """

    def __init__(
        self,
        in_channels: int | Sequence[int],
        num_classes: int,
        channels: int = 512,
        pool_scales: Sequence[int] = (1, 2, 3, 6),
        in_index: int | Sequence[int] = -1,
        **kwargs: Any,
    ) -> None:
        if not isinstance(in_index, int):
            raise ValueError(f"PSPHead takes one input feature: in_index must be an int, got {in_index!r}")
        scales = tuple(pool_scales)
        if not scales or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in scales):
            raise ValueError(f"PSPHead: pool_scales must be a non-empty list of positive ints, got {pool_scales!r}")
        super().__init__(in_channels, channels, num_classes, in_index=in_index, **kwargs)
        self.pool_scales = scales
        self.psp_modules = PyramidPoolingModule(
            self.in_channels, channels, scales, norm=self.norm, align_corners=self.align_corners
        )
        self.bottleneck = ConvNormAct(self.in_channels + len(scales) * channels, channels, 3, norm=self.norm)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """[B, in_channels, H, W] -> [B, channels, H, W]."""
        return self.bottleneck(torch.cat([x, *self.psp_modules(x)], dim=1))
