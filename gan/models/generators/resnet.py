"""CycleGAN's ResNet generator (Zhu et al. 2017, after Johnson et al. 2016): downsample, residual blocks, upsample."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from gan.registry import MODELS
from oars.models.layers import build_norm_layer

from ..utils import GANNetwork
from .unet import uses_bias

PADDINGS = {"reflect": nn.ReflectionPad2d, "replicate": nn.ReplicationPad2d, "zeros": None}


def _padded_conv(channels_in: int, channels_out: int, kernel: int, padding: str, bias: bool) -> list[nn.Module]:
    pad = kernel // 2
    if PADDINGS[padding] is None:
        return [nn.Conv2d(channels_in, channels_out, kernel, padding=pad, bias=bias)]
    return [PADDINGS[padding](pad), nn.Conv2d(channels_in, channels_out, kernel, bias=bias)]


class ResnetBlock(nn.Module):
    """x + (pad -> 3x3 conv -> norm -> ReLU [-> dropout] -> pad -> 3x3 conv -> norm)(x), channels kept."""

    def __init__(self, channels: int, norm: str | dict, padding: str, use_dropout: bool, bias: bool) -> None:
        super().__init__()
        layers = _padded_conv(channels, channels, 3, padding, bias) + [build_norm_layer(norm, channels), nn.ReLU(True)]
        if use_dropout:
            layers.append(nn.Dropout(0.5))
        layers += _padded_conv(channels, channels, 3, padding, bias) + [build_norm_layer(norm, channels)]
        self.block = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x)


@MODELS.register_module()
class ResnetGenerator(GANNetwork):
    """[B, in_channels, H, W] in [-1, 1] -> [B, out_channels, H, W] in [-1, 1] (H, W multiples of 4).

    7x7 conv to ``ngf``, two stride-2 3x3 convs (x2 channels each), ``num_blocks`` residual blocks at ``4 * ngf``,
    two stride-2 transposed convs back, 7x7 conv + tanh; norm + ReLU after every conv but the last.
    ``num_blocks=9`` with InstanceNorm and reflection padding is CycleGAN's ``resnet_9blocks`` (11.38 M parameters
    at ngf 64).

    Args:
        padding: ``reflect`` (CycleGAN), ``replicate`` or ``zeros``.
    """

    def __init__(self, in_channels: int = 3, out_channels: int = 3, ngf: int = 64, num_blocks: int = 9,
                 norm: str | dict = "IN", padding: str = "reflect", use_dropout: bool = False,
                 init: dict[str, Any] | None = None) -> None:
        super().__init__(init)
        if padding not in PADDINGS:
            raise ValueError(f"ResnetGenerator.padding: expected one of {list(PADDINGS)}, got {padding!r}")
        bias = uses_bias(norm)
        layers = _padded_conv(in_channels, ngf, 7, padding, bias) + [build_norm_layer(norm, ngf), nn.ReLU(True)]
        ch = ngf
        for _ in range(2):
            layers += [nn.Conv2d(ch, ch * 2, 3, 2, 1, bias=bias), build_norm_layer(norm, ch * 2), nn.ReLU(True)]
            ch *= 2
        layers += [ResnetBlock(ch, norm, padding, use_dropout, bias) for _ in range(num_blocks)]
        for _ in range(2):
            layers += [nn.ConvTranspose2d(ch, ch // 2, 3, 2, 1, output_padding=1, bias=bias),
                       build_norm_layer(norm, ch // 2), nn.ReLU(True)]
            ch //= 2
        layers += _padded_conv(ch, out_channels, 7, padding, True) + [nn.Tanh()]
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] % 4 or x.shape[-2] % 4:
            raise ValueError(f"ResnetGenerator: input {tuple(x.shape[-2:])} must be a multiple of 4")
        return self.net(x)
