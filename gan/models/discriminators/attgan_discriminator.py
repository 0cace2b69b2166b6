"""AttGAN's / STGAN's discriminator: shared conv features, an adversarial head and an attribute classifier."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from gan.registry import MODELS
from oars.models.layers import build_norm_layer

from ..generators.attgan_generator import KaimingGANNetwork, check_size


@MODELS.register_module()
class AttGANDiscriminator(KaimingGANNetwork):
    """Image [B, 3, S, S] -> (adversarial logit [B, 1], attribute logits [B, K]).

    ``num_layers`` (5) 4x4 stride-2 convs, channels ``min(conv_dim * 2**i, max_dim)`` (64 ... 1024), each with
    norm (InstanceNorm: per-sample, as the gradient penalty needs) + LeakyReLU(0.2); the features are flattened
    (1024 x 4 x 4 at 128 px) into two heads of ``fc_dim`` (1024) + LeakyReLU + a linear layer: one logit (the
    critic) and K attribute logits. Used by AttGAN and STGAN (44.72 M parameters at 128 px and 13 attributes).

    Args:
        image_size: S (the heads' input is ``channels x (S / 2**num_layers)**2``); 128 for CelebA.
        norm: default affine InstanceNorm; any norm spec, or ``none`` for no norm (the conv biases are then on).
    """

    def __init__(self, num_attrs: int = 13, image_size: int = 128, in_channels: int = 3, conv_dim: int = 64,
                 num_layers: int = 5, max_dim: int = 1024, fc_dim: int = 1024, norm: str | dict | None = None,
                 negative_slope: float = 0.2, init: dict[str, Any] | None = None) -> None:
        super().__init__(init)
        if image_size % 2 ** num_layers:
            raise ValueError(f"AttGANDiscriminator: image_size {image_size} must be a multiple of 2**num_layers "
                             f"= {2 ** num_layers}")
        norm = {"type": "IN", "affine": True} if norm is None else norm
        norm = None if norm == "none" else norm
        self.image_size, self.num_layers, self.num_attrs = int(image_size), int(num_layers), int(num_attrs)
        layers: list[nn.Module] = []
        ch = in_channels
        for i in range(num_layers):
            d = min(conv_dim * 2 ** i, max_dim)
            layers.append(nn.Conv2d(ch, d, 4, 2, 1, bias=norm is None))
            if norm is not None:
                layers.append(build_norm_layer(norm, d))
            layers.append(nn.LeakyReLU(negative_slope, True))
            ch = d
        self.features = nn.Sequential(*layers)
        flat = ch * (image_size // 2 ** num_layers) ** 2
        self.adv_head = nn.Sequential(nn.Linear(flat, fc_dim), nn.LeakyReLU(negative_slope, True),
                                      nn.Linear(fc_dim, 1))
        self.cls_head = nn.Sequential(nn.Linear(flat, fc_dim), nn.LeakyReLU(negative_slope, True),
                                      nn.Linear(fc_dim, self.num_attrs))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        check_size(type(self).__name__, x, 2 ** self.num_layers)
        if x.shape[-1] != self.image_size or x.shape[-2] != self.image_size:
            raise ValueError(f"AttGANDiscriminator: input {tuple(x.shape[-2:])}, built for image_size "
                             f"{self.image_size} (its heads are fully connected)")
        h = self.features(x).flatten(1)
        return self.adv_head(h), self.cls_head(h)
