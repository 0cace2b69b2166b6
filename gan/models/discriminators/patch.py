"""PatchGAN discriminator (pix2pix, CycleGAN): one real/fake logit per overlapping 70x70 patch."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from gan.registry import MODELS
from oars.models.layers import build_norm_layer

from ..generators.unet import uses_bias
from ..utils import GANNetwork


@MODELS.register_module()
class PatchDiscriminator(GANNetwork):
    """[B, in_channels, H, W] -> logits [B, 1, h, w].

    4x4 convs: stride 2 to ``ndf`` (LeakyReLU 0.2, no norm), ``n_layers - 1`` more stride-2 ones doubling the
    channels (capped at ``8 * ndf``) with norm, one stride-1 with norm, and a stride-1 conv to one channel. With
    ``n_layers=3`` every output sees a 70x70 input patch, and a 256 px input gives a 30x30 map (2.77 M parameters
    at ndf 64 with 6 input channels, pix2pix's ``basic`` D on concat(A, B)).

    Args:
        in_channels: 6 for pix2pix (source and target concatenated), 3 for CycleGAN.
    """

    def __init__(self, in_channels: int = 3, ndf: int = 64, n_layers: int = 3, norm: str | dict = "BN",
                 init: dict[str, Any] | None = None) -> None:
        super().__init__(init)
        if n_layers < 1:
            raise ValueError(f"PatchDiscriminator.n_layers: expected >= 1, got {n_layers}")
        bias = uses_bias(norm)
        layers: list[nn.Module] = [nn.Conv2d(in_channels, ndf, 4, 2, 1), nn.LeakyReLU(0.2, True)]
        ch = ndf
        for n in range(1, n_layers + 1):
            out = ndf * min(2 ** n, 8)
            stride = 2 if n < n_layers else 1
            layers += [nn.Conv2d(ch, out, 4, stride, 1, bias=bias), build_norm_layer(norm, out),
                       nn.LeakyReLU(0.2, True)]
            ch = out
        layers.append(nn.Conv2d(ch, 1, 4, 1, 1))
        self.net = nn.Sequential(*layers)

    @staticmethod
    def receptive_field(n_layers: int) -> int:
        """Input patch side one output logit sees (70 for n_layers 3)."""
        rf = 1
        strides = [2] * n_layers + [1, 1]
        for stride in reversed(strides):
            rf = (rf - 1) * stride + 4
        return rf

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)
