"""AttGAN's encoder-decoder generator (He et al. 2019, "AttGAN: Facial Attribute Editing by Only Changing What You
Want"), and the pieces the attribute-editing networks share (attribute tiling, Kaiming initialisation)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from gan.registry import MODELS
from oars.models.layers import build_norm_layer
from oars.models.utils import load_pretrained

from ..utils import GANNetwork


def concat_attrs(x: torch.Tensor, attrs: torch.Tensor) -> torch.Tensor:
    """[B, C, H, W] ++ attrs [B, K] tiled to [B, K, H, W] -> [B, C + K, H, W] (how every attribute GAN conditions a
    feature map on a vector: one constant plane per attribute)."""
    b, _, h, w = x.shape
    if attrs.dim() != 2 or attrs.shape[0] != b:
        raise ValueError(f"attribute vector must be [B={b}, K], got {tuple(attrs.shape)}")
    return torch.cat([x, attrs.to(x.dtype)[:, :, None, None].expand(-1, -1, h, w)], dim=1)


def kaiming_init(module: nn.Module, bn_std: float = 0.02) -> None:
    """PaddleGAN's ``initial='kaiming'`` of its StarGAN/AttGAN/STGAN networks: conv / transposed conv / linear
    weights AND biases ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (fan_in = in_channels * k * k for a conv, out_channels
    * k * k for a transposed conv: PyTorch's own default, which StarGAN's authors use too); BatchNorm scales
    ~ N(1, ``bn_std``), InstanceNorm / GroupNorm scales 1, shifts 0. Not the DCGAN N(0, 0.02) rule: with it the
    unnormalised critics start with tiny gradients."""
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d, nn.Linear)):
            fan_in = m.weight[0].numel()  # a transposed conv's weight is [in, out, k, k]: out * k * k
            bound = 1.0 / math.sqrt(fan_in)
            nn.init.uniform_(m.weight, -bound, bound)
            if m.bias is not None:
                nn.init.uniform_(m.bias, -bound, bound)
        elif isinstance(m, (nn.InstanceNorm2d, nn.GroupNorm, nn.BatchNorm2d)) and m.weight is not None:
            if isinstance(m, nn.BatchNorm2d):
                nn.init.normal_(m.weight, 1.0, bn_std)
            else:
                nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


class KaimingGANNetwork(GANNetwork):
    """A :class:`GANNetwork` initialised with :func:`kaiming_init`, then its ``init`` checkpoint if any."""

    def init_weights(self) -> None:
        kaiming_init(self)
        if self._init is not None:
            load_pretrained(self, self._init, skip_prefixes=())


def check_size(owner: str, x: torch.Tensor, factor: int) -> None:
    if x.shape[-1] % factor or x.shape[-2] % factor:
        raise ValueError(f"{owner}: input {tuple(x.shape[-2:])} (H, W) must be a multiple of {factor}")


@MODELS.register_module()
class AttGANGenerator(KaimingGANNetwork):
    """Image [B, 3, H, W] in [-1, 1] + attribute code [B, K] -> edited image [B, 3, H, W] in [-1, 1].

    Encoder: ``num_layers`` 4x4 stride-2 convs (channels ``min(conv_dim * 2**i, max_dim)``: 64 ... 1024) + norm +
    LeakyReLU. Decoder: the code tiled onto the deepest features, ``num_layers - 1`` 4x4 stride-2 transposed convs
    (1024, 512, 256, 128) + norm + ReLU, the first ``shortcut_layers`` of them concatenated with the encoder
    feature of the same size (a U-Net skip) and the first ``inject_layers`` with the tiled code again, then a
    transposed conv to ``out_channels`` + tanh. AttGAN: 1 shortcut, 1 injection (43.46 M parameters at 13
    attributes); STGAN: 4 and 4 on its transferred features (:class:`STGANGenerator`).

    :meth:`encode` and :meth:`decode` are public because AttGAN encodes once and decodes twice (the edit and the
    reconstruction) per training iteration. H, W: multiples of ``2**num_layers``.

    Args:
        num_attrs: K (set by the model from its ``attr_names``).
        norm: the encoder's and decoder's norm (BatchNorm in AttGAN and STGAN).
        negative_slope: the encoder's LeakyReLU slope (0.2, the authors').
    """

    def __init__(self, num_attrs: int = 13, in_channels: int = 3, out_channels: int = 3, conv_dim: int = 64,
                 num_layers: int = 5, max_dim: int = 1024, shortcut_layers: int = 1, inject_layers: int = 1,
                 norm: str | dict = "BN", negative_slope: float = 0.2, init: dict[str, Any] | None = None) -> None:
        super().__init__(init)
        if num_layers < 2:
            raise ValueError(f"{type(self).__name__}.num_layers: expected >= 2, got {num_layers}")
        self.num_attrs, self.num_layers = int(num_attrs), int(num_layers)
        self.shortcut_layers = min(int(shortcut_layers), num_layers - 1)
        self.inject_layers = min(int(inject_layers), num_layers - 1)
        self.enc_dims = [min(conv_dim * 2 ** i, max_dim) for i in range(num_layers)]
        self.encoder = nn.ModuleList()
        ch = in_channels
        for d in self.enc_dims:
            self.encoder.append(nn.Sequential(nn.Conv2d(ch, d, 4, 2, 1, bias=False), build_norm_layer(norm, d),
                                              nn.LeakyReLU(negative_slope, True)))
            ch = d
        self.decoder = nn.ModuleList()
        ch = self.enc_dims[-1] + self.num_attrs
        for i in range(num_layers - 1):
            d = min(conv_dim * 2 ** (num_layers - 1 - i), max_dim)
            self.decoder.append(nn.Sequential(nn.ConvTranspose2d(ch, d, 4, 2, 1, bias=False),
                                              build_norm_layer(norm, d), nn.ReLU(True)))
            ch = d + (self.skip_channels(i) if i < self.shortcut_layers else 0)
            ch += self.num_attrs if i < self.inject_layers else 0
        self.to_image = nn.Sequential(nn.ConvTranspose2d(ch, out_channels, 4, 2, 1), nn.Tanh())

    def skip_channels(self, i: int) -> int:
        """Channels of the skip feature concatenated after decoder layer ``i`` (the encoder's level
        ``num_layers - 2 - i``)."""
        return self.enc_dims[self.num_layers - 2 - i]

    def encode(self, x: torch.Tensor) -> list[torch.Tensor]:
        """[B, 3, H, W] -> the ``num_layers`` encoder features, finest first ([B, 64, H/2, W/2] ... [B, 1024,
        H/32, W/32])."""
        check_size(type(self).__name__, x, 2 ** self.num_layers)
        feats = []
        for layer in self.encoder:
            x = layer(x)
            feats.append(x)
        return feats

    def decode(self, feats: list[torch.Tensor], attrs: torch.Tensor) -> torch.Tensor:
        """Encoder features (as :meth:`encode` returns them) + code [B, K] -> image [B, 3, H, W] in [-1, 1]."""
        z = concat_attrs(feats[-1], attrs)
        for i, layer in enumerate(self.decoder):
            z = layer(z)
            if i < self.shortcut_layers:
                z = torch.cat([z, feats[self.num_layers - 2 - i]], dim=1)
            if i < self.inject_layers:
                z = concat_attrs(z, attrs)
        return self.to_image(z)

    def forward(self, x: torch.Tensor, attrs: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x), attrs)
