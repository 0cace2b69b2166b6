"""DCGAN's generator (Radford et al. 2015), optionally class-conditional (CGAN: one-hot label appended to the noise)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from gan.registry import MODELS
from oars.models.layers import build_norm_layer

from ..utils import GANNetwork


def one_hot(label: torch.Tensor, num_classes: int, dtype: torch.dtype) -> torch.Tensor:
    """int [B] -> [B, num_classes] of ``dtype`` (a comparison with arange, which every exporter can express)."""
    classes = torch.arange(num_classes, device=label.device)
    return (label.long().reshape(-1, 1) == classes).to(dtype)


def dcgan_scales(output_size: int) -> tuple[int, int]:
    """(base, n) with ``output_size = base * 2**n``: halve while even and above 7 (64 -> (4, 4), 32 -> (4, 3),
    28 -> (7, 2)). Raises ValueError for sizes that do not reduce to a base of 4..7 with at least one halving."""
    size, n = int(output_size), 0
    while size % 2 == 0 and size > 7:
        size //= 2
        n += 1
    if n < 1 or not 4 <= size <= 7:
        raise ValueError(f"DCGAN output_size {output_size}: expected base * 2**n with base 4..7 and n >= 1 "
                         "(e.g. 28, 32, 64, 128)")
    return size, n


@MODELS.register_module()
class DCGANGenerator(GANNetwork):
    """Noise [B, noise_size] (plus, with ``num_classes``, labels [B] int64) -> images [B, out_channels, S, S] in
    [-1, 1] (tanh).

    A transposed conv maps the (noise ++ one-hot) vector to a ``base x base`` map with ``ngf * 2**(n-1)`` channels,
    then ``n - 1`` stride-2 transposed convs halve the channels and double the size, all with norm + ReLU, and a
    last stride-2 transposed conv + tanh gives the image (``S = base * 2**n``; 64 px: 4 -> 8 -> 16 -> 32 -> 64 with
    512/256/128/64 channels at ngf 64, the paper's network: 3.58 M parameters for RGB and noise 100).

    Args:
        noise_size: z dimension (100 in the paper).
        out_channels: image channels.
        ngf: width of the last hidden layer.
        output_size: S (28, 32, 64, ...).
        num_classes: 0 = unconditional; K > 0 = the one-hot label is concatenated to the noise (CGAN).
        norm: normalisation of the hidden layers (BN).
    """

    def __init__(self, noise_size: int = 100, out_channels: int = 3, ngf: int = 64, output_size: int = 64,
                 num_classes: int = 0, norm: str | dict = "BN", init: dict[str, Any] | None = None) -> None:
        super().__init__(init)
        base, n = dcgan_scales(output_size)
        self.noise_size, self.num_classes, self.output_size = int(noise_size), int(num_classes), int(output_size)
        self.out_channels = out_channels
        ch = ngf * 2 ** (n - 1)
        layers: list[nn.Module] = [nn.ConvTranspose2d(self.noise_size + self.num_classes, ch, base, 1, 0, bias=False),
                                   build_norm_layer(norm, ch), nn.ReLU(True)]
        for _ in range(n - 1):
            layers += [nn.ConvTranspose2d(ch, ch // 2, 4, 2, 1, bias=False), build_norm_layer(norm, ch // 2),
                       nn.ReLU(True)]
            ch //= 2
        layers += [nn.ConvTranspose2d(ch, out_channels, 4, 2, 1, bias=False), nn.Tanh()]
        self.net = nn.Sequential(*layers)

    def forward(self, noise: torch.Tensor, label: torch.Tensor | None = None) -> torch.Tensor:
        """noise: float [B, noise_size] (or [B, noise_size, 1, 1]); label: int64 [B] when conditional."""
        x = noise.flatten(1)
        if x.shape[1] != self.noise_size:
            raise ValueError(f"DCGANGenerator: noise of shape {tuple(noise.shape)}, expected [B, {self.noise_size}]")
        if self.num_classes:
            if label is None:
                raise ValueError(f"DCGANGenerator: num_classes={self.num_classes} needs a label [B] for each noise")
            x = torch.cat([x, one_hot(label, self.num_classes, x.dtype)], dim=1)
        return self.net(x[:, :, None, None])
