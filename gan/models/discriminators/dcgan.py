"""DCGAN's discriminator (Radford et al. 2015), optionally class-conditional (CGAN: label maps appended)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from gan.registry import MODELS
from oars.models.layers import build_norm_layer

from ..generators.dcgan import dcgan_scales, one_hot
from ..utils import GANNetwork


@MODELS.register_module()
class DCGANDiscriminator(GANNetwork):
    """Images [B, in_channels, S, S] (plus labels [B] with ``num_classes``) -> logits [B, 1].

    The mirror of :class:`DCGANGenerator`: a 4x4 stride-2 conv + LeakyReLU(0.2) (no norm on the input layer), then
    ``n - 1`` stride-2 convs doubling the channels with norm + LeakyReLU, then a ``base x base`` conv to one logit
    (64 px at ndf 64: 2.77 M parameters for RGB, the paper's). Conditional: the label's one-hot, broadcast to
    [B, K, S, S], is concatenated to the image channels (CGAN's label map).
    """

    def __init__(self, in_channels: int = 3, ndf: int = 64, input_size: int = 64, num_classes: int = 0,
                 norm: str | dict = "BN", init: dict[str, Any] | None = None) -> None:
        super().__init__(init)
        base, n = dcgan_scales(input_size)
        self.input_size, self.num_classes = int(input_size), int(num_classes)
        layers: list[nn.Module] = [nn.Conv2d(in_channels + self.num_classes, ndf, 4, 2, 1, bias=False),
                                   nn.LeakyReLU(0.2, True)]
        ch = ndf
        for _ in range(n - 1):
            layers += [nn.Conv2d(ch, ch * 2, 4, 2, 1, bias=False), build_norm_layer(norm, ch * 2),
                       nn.LeakyReLU(0.2, True)]
            ch *= 2
        layers.append(nn.Conv2d(ch, 1, base, 1, 0, bias=False))
        self.net = nn.Sequential(*layers)

    def forward(self, img: torch.Tensor, label: torch.Tensor | None = None) -> torch.Tensor:
        if img.shape[-2:] != (self.input_size, self.input_size):
            raise ValueError(f"DCGANDiscriminator: images of size {tuple(img.shape[-2:])}, expected "
                             f"{self.input_size}x{self.input_size} (input_size)")
        if self.num_classes:
            if label is None:
                raise ValueError(f"DCGANDiscriminator: num_classes={self.num_classes} needs a label [B] per image")
            maps = one_hot(label, self.num_classes, img.dtype)[:, :, None, None].expand(-1, -1, *img.shape[-2:])
            img = torch.cat([img, maps], dim=1)
        return self.net(img).flatten(1)
