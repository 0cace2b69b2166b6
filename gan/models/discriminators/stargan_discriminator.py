"""StarGAN's discriminator: a PatchGAN real/fake head and an attribute-classification head on shared features."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from gan.registry import MODELS

from ..generators.attgan_generator import KaimingGANNetwork, check_size


@MODELS.register_module()
class StarGANDiscriminator(KaimingGANNetwork):
    """Image [B, 3, S, S] -> (real/fake logits [B, 1, S/2**n, S/2**n], attribute logits [B, K]).

    ``num_layers`` (6) 4x4 stride-2 convs with bias and LeakyReLU(0.01), channels ``conv_dim * 2**i`` (64 ...
    2048), no norm (the gradient penalty wants per-sample gradients). Source head: a 3x3 conv to one channel (a
    PatchGAN map, 2x2 at 128 px); class head: an ``S / 2**n``-sized conv to K logits (the whole image). At 128 px,
    conv_dim 64 and 5 attributes: 44.76 M parameters (the paper's network).

    Args:
        image_size: S (the class head's kernel is ``S / 2**num_layers``); 128 for CelebA.
    """

    def __init__(self, num_attrs: int = 5, image_size: int = 128, in_channels: int = 3, conv_dim: int = 64,
                 num_layers: int = 6, negative_slope: float = 0.01, init: dict[str, Any] | None = None) -> None:
        super().__init__(init)
        if image_size % 2 ** num_layers:
            raise ValueError(f"StarGANDiscriminator: image_size {image_size} must be a multiple of 2**num_layers "
                             f"= {2 ** num_layers}")
        self.image_size, self.num_layers, self.num_attrs = int(image_size), int(num_layers), int(num_attrs)
        layers: list[nn.Module] = []
        ch, d = in_channels, conv_dim
        for _ in range(num_layers):
            layers += [nn.Conv2d(ch, d, 4, 2, 1), nn.LeakyReLU(negative_slope, True)]
            ch, d = d, d * 2
        self.features = nn.Sequential(*layers)
        self.src_head = nn.Conv2d(ch, 1, 3, 1, 1, bias=False)
        self.cls_head = nn.Conv2d(ch, self.num_attrs, image_size // 2 ** num_layers, bias=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        check_size(type(self).__name__, x, 2 ** self.num_layers)
        if x.shape[-1] != self.image_size or x.shape[-2] != self.image_size:
            raise ValueError(f"StarGANDiscriminator: input {tuple(x.shape[-2:])}, built for image_size "
                             f"{self.image_size} (its class head sees the whole image)")
        h = self.features(x)
        return self.src_head(h), self.cls_head(h).flatten(1)
