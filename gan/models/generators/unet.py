"""pix2pix's U-Net generator (Isola et al. 2017): an encoder-decoder with skips between mirrored levels."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from gan.registry import MODELS
from oars.models.layers import build_norm_layer, norm_type

from ..utils import GANNetwork


def uses_bias(norm: str | dict | None) -> bool:
    """Conv biases where the norm has no shift of its own (pix2pix/CycleGAN: none or InstanceNorm)."""
    return norm is None or norm_type(norm) == "IN"


@MODELS.register_module()
class UNetGenerator(GANNetwork):
    """[B, in_channels, H, W] in [-1, 1] -> [B, out_channels, H, W] in [-1, 1]; H, W multiples of 2**num_downs.

    Level i (0 = outermost) halves the size with a 4x4 stride-2 conv to ``ngf * min(2**i, 8)`` channels
    (LeakyReLU 0.2 before it, norm after it except at levels 0 and innermost); the decoder mirrors it with
    ReLU -> 4x4 stride-2 transposed conv -> norm (dropout 0.5 on the ``num_downs - 5`` levels next to the innermost)
    and concatenates the encoder's feature of the level above (skip first, as pix2pix). The outermost decoder ends
    with tanh. ``num_downs=8`` at 256 px is pix2pix's ``unet_256`` (54.41 M parameters at ngf 64, BN).

    Args:
        in_channels, out_channels: image channels.
        ngf: channels of the outermost level.
        num_downs: number of halvings (>= 5; 8 for 256 px takes the bottleneck to 1x1).
        norm: BN (pix2pix) or IN.
        use_dropout: dropout in the decoder's middle levels (pix2pix's only noise source).
    """

    def __init__(self, in_channels: int = 3, out_channels: int = 3, ngf: int = 64, num_downs: int = 8,
                 norm: str | dict = "BN", use_dropout: bool = True, init: dict[str, Any] | None = None) -> None:
        super().__init__(init)
        if num_downs < 5:
            raise ValueError(f"UNetGenerator.num_downs: expected >= 5, got {num_downs}")
        self.num_downs = num_downs
        bias = uses_bias(norm)
        ch = [ngf * min(2 ** i, 8) for i in range(num_downs)]
        dropout_levels = set(range(num_downs - 1 - (num_downs - 5), num_downs - 1)) if use_dropout else set()
        self.downs = nn.ModuleList([nn.Conv2d(in_channels, ch[0], 4, 2, 1, bias=bias)])
        for i in range(1, num_downs):
            layers: list[nn.Module] = [nn.LeakyReLU(0.2, True), nn.Conv2d(ch[i - 1], ch[i], 4, 2, 1, bias=bias)]
            if i < num_downs - 1:
                layers.append(build_norm_layer(norm, ch[i]))
            self.downs.append(nn.Sequential(*layers))
        ups: list[nn.Module] = [nn.Sequential(nn.ReLU(True), nn.ConvTranspose2d(2 * ch[0], out_channels, 4, 2, 1),
                                              nn.Tanh())]
        for i in range(1, num_downs):
            in_ch = ch[i] if i == num_downs - 1 else 2 * ch[i]
            layers = [nn.ReLU(True), nn.ConvTranspose2d(in_ch, ch[i - 1], 4, 2, 1, bias=bias),
                      build_norm_layer(norm, ch[i - 1])]
            if i in dropout_levels:
                layers.append(nn.Dropout(0.5))
            ups.append(nn.Sequential(*layers))
        self.ups = nn.ModuleList(ups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        step = 2 ** self.num_downs
        if x.shape[-1] % step or x.shape[-2] % step:
            raise ValueError(f"UNetGenerator: input {tuple(x.shape[-2:])} must be a multiple of 2**num_downs={step}")
        feats = []
        for down in self.downs:
            x = down(x)
            feats.append(x)
        y = self.ups[-1](feats[-1])
        for i in range(self.num_downs - 2, -1, -1):
            y = self.ups[i](torch.cat([feats[i], y], dim=1))
        return y
