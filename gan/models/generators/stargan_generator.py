"""StarGAN's generator (Choi et al. 2018, "StarGAN: Unified Generative Adversarial Networks for Multi-Domain
Image-to-Image Translation")."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from gan.registry import MODELS
from oars.models.layers import build_norm_layer

from .attgan_generator import KaimingGANNetwork, check_size, concat_attrs
from .resnet import ResnetBlock


@MODELS.register_module()
class StarGANGenerator(KaimingGANNetwork):
    """Image [B, 3, H, W] in [-1, 1] + target attributes [B, K] (0/1) -> translated image [B, 3, H, W] in [-1, 1].

    The attribute vector is tiled to K planes and concatenated to the image; a 7x7 conv to ``conv_dim``, two 4x4
    stride-2 convs (x2 channels each), ``num_blocks`` residual blocks at ``4 * conv_dim``, two 4x4 stride-2
    transposed convs back, a 7x7 conv to 3 channels + tanh. Convs have no bias; InstanceNorm (affine) + ReLU after
    every conv but the last. At conv_dim 64, 6 blocks and 5 attributes: 8.43 M parameters (the paper's network).
    H, W: multiples of 4.
    """

    def __init__(self, num_attrs: int = 5, in_channels: int = 3, out_channels: int = 3, conv_dim: int = 64,
                 num_blocks: int = 6, norm: str | dict | None = None, init: dict[str, Any] | None = None) -> None:
        super().__init__(init)
        norm = norm or {"type": "IN", "affine": True}
        self.num_attrs = int(num_attrs)
        layers: list[nn.Module] = [nn.Conv2d(in_channels + self.num_attrs, conv_dim, 7, 1, 3, bias=False),
                                   build_norm_layer(norm, conv_dim), nn.ReLU(True)]
        ch = conv_dim
        for _ in range(2):
            layers += [nn.Conv2d(ch, ch * 2, 4, 2, 1, bias=False), build_norm_layer(norm, ch * 2), nn.ReLU(True)]
            ch *= 2
        layers += [ResnetBlock(ch, norm, "zeros", False, False) for _ in range(num_blocks)]
        for _ in range(2):
            layers += [nn.ConvTranspose2d(ch, ch // 2, 4, 2, 1, bias=False), build_norm_layer(norm, ch // 2),
                       nn.ReLU(True)]
            ch //= 2
        layers += [nn.Conv2d(ch, out_channels, 7, 1, 3, bias=False), nn.Tanh()]
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor, attrs: torch.Tensor) -> torch.Tensor:
        check_size(type(self).__name__, x, 4)
        if attrs.shape[-1] != self.num_attrs:
            raise ValueError(f"StarGANGenerator: {attrs.shape[-1]} attributes given, built for {self.num_attrs}")
        return self.net(concat_attrs(x, attrs))
