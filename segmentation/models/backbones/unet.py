"""U-Net (Ronneberger et al. 2015) as a backbone: encoder-decoder with skip connections."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from oars.models.layers import ConvNormAct
from segmentation.registry import MODELS


class DoubleConv(nn.Sequential):
    """Two 3x3 ConvNormAct: the unit of every U-Net stage."""

    def __init__(self, in_channels: int, out_channels: int, norm: Any = "BN") -> None:
        super().__init__(
            ConvNormAct(in_channels, out_channels, 3, norm=norm), ConvNormAct(out_channels, out_channels, 3, norm=norm)
        )


class UpBlock(nn.Module):
    """Upsample x2 halving the channels (2x2 transposed conv, or bilinear + 1x1 conv), concat the skip,
    then a DoubleConv."""

    def __init__(self, in_channels: int, out_channels: int, norm: Any = "BN", upsample: str = "deconv") -> None:
        super().__init__()
        if upsample == "deconv":
            self.up = nn.ConvTranspose2d(in_channels, out_channels, kernel_size=2, stride=2)
        else:
            self.up = nn.Sequential(
                nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
                ConvNormAct(in_channels, out_channels, 1, norm=norm),
            )
        self.conv = DoubleConv(2 * out_channels, out_channels, norm=norm)

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        return self.conv(torch.cat([skip, self.up(x)], dim=1))


@MODELS.register_module()
class UNet(nn.Module):
    """Encoder: ``num_stages`` DoubleConv blocks (``base_channels * 2**i`` channels) with 2x2 max-pooling
    between them; decoder: ``num_stages - 1`` UpBlocks back to full resolution.

    ``forward`` returns the bottleneck and every decoder output, deepest first, so the last one is at
    full resolution with ``base_channels`` channels (``out_channels``, ``out_strides`` describe them);
    an ``FCNHead(in_index=-1)`` classifies it. Inputs must have H and W divisible by
    ``2 ** (num_stages - 1)`` (16 by default); pad with the data preprocessor's ``size_divisor``.
    """

    UPSAMPLE_MODES = ("deconv", "bilinear")

    def __init__(
        self,
        in_channels: int = 3,
        base_channels: int = 64,
        num_stages: int = 5,
        norm: Any = "BN",
        upsample: str = "deconv",
    ) -> None:
        super().__init__()
        if upsample not in self.UPSAMPLE_MODES:
            raise ValueError(f"UNet upsample must be one of {self.UPSAMPLE_MODES}, got {upsample!r}")
        if num_stages < 2:
            raise ValueError(f"UNet num_stages must be >= 2, got {num_stages}")
        widths = [base_channels * 2**i for i in range(num_stages)]
        self.num_stages = num_stages
        self.divisor = 2 ** (num_stages - 1)
        self.pool = nn.MaxPool2d(2)
        self.encoder = nn.ModuleList(
            DoubleConv(in_channels if i == 0 else widths[i - 1], widths[i], norm=norm) for i in range(num_stages)
        )
        self.decoder = nn.ModuleList(
            UpBlock(widths[i], widths[i - 1], norm=norm, upsample=upsample) for i in range(num_stages - 1, 0, -1)
        )
        self.out_channels = widths[::-1]
        self.out_strides = [2**i for i in range(num_stages - 1, -1, -1)]

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h, w = x.shape[-2:]
        if h % self.divisor or w % self.divisor:
            raise ValueError(
                f"UNet input of shape {tuple(x.shape)}: height and width must be divisible by {self.divisor} "
                f"(2 ** (num_stages - 1)); set the data preprocessor's size_divisor to {self.divisor}"
            )
        skips = []
        for i, stage in enumerate(self.encoder):
            x = stage(x if i == 0 else self.pool(x))
            skips.append(x)
        outs = [x]
        for block, skip in zip(self.decoder, reversed(skips[:-1])):
            x = block(x, skip)
            outs.append(x)
        return tuple(outs)
