"""DeepLabV3+ head (Chen et al. 2018): separable ASPP on the deepest feature plus a stride-4 decoder."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from oars.models.layers import ConvNormAct
from segmentation.registry import MODELS

from ..utils import resize
from .aspp_head import ASPP, DepthwiseSeparableConv
from .decode_head import BaseDecodeHead


@MODELS.register_module()
class DeepLabV3PlusHead(BaseDecodeHead):
    """ASPP with depthwise-separable atrous convs over the deepest input, upsampled to the low-level input,
    concatenated with it (reduced to ``c1_channels`` by a 1x1 conv), refined by two separable 3x3 convs
    and classified at that (stride-4) resolution.

    ``in_index`` picks ``(low_level, deepest)`` features; the default ``(0, -1)`` is ResNet stage 1
    (stride 4) and stage 4. ``dilations`` (12, 24, 36) suit output stride 8; the paper uses (6, 12, 18)
    at output stride 16.
    """

    def __init__(
        self,
        in_channels: int | Sequence[int],
        num_classes: int,
        channels: int = 256,
        c1_channels: int = 48,
        dilations: Sequence[int] = (12, 24, 36),
        aspp_dropout: float = 0.1,
        in_index: Sequence[int] = (0, -1),
        **kwargs: Any,
    ) -> None:
        if isinstance(in_index, int) or len(in_index) != 2:
            raise ValueError(f"DeepLabV3PlusHead needs in_index=(low_level, deepest), two indices, got {in_index!r}")
        super().__init__(in_channels, channels, num_classes, in_index=in_index, **kwargs)
        c1_in, x_in = self.in_channels
        self.dilations = tuple(int(d) for d in dilations)
        self.aspp = ASPP(x_in, channels, self.dilations, norm=self.norm, separable=True, project_dropout=aspp_dropout)
        self.c1_bottleneck = ConvNormAct(c1_in, c1_channels, 1, norm=self.norm)
        self.sep_bottleneck = torch.nn.Sequential(
            DepthwiseSeparableConv(channels + c1_channels, channels, 3, norm=self.norm),
            DepthwiseSeparableConv(channels, channels, 3, norm=self.norm),
        )

    def forward_features(self, x: list[torch.Tensor]) -> torch.Tensor:
        c1, deepest = x
        out = resize(self.aspp(deepest), c1.shape[-2:], self.align_corners)
        return self.sep_bottleneck(torch.cat([out, self.c1_bottleneck(c1)], dim=1))
