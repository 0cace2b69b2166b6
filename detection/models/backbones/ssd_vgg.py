"""SSD's VGG-16 (Liu et al. 2016) with torchvision's ``ssd300_vgg16`` parameter names, so its weights load as-is.

VGG-16 up to conv4_3 (``features``, numbered as ``torchvision.models.vgg16().features[:23]``, pool3 in ceil mode so
that 300 px give a 38x38 conv4_3), conv4_3 L2-normalised and multiplied by a learned per-channel scale
(``scale_weight``, initialised to 20); then ``extra.0``: pool4, conv5_1..conv5_3, and ``fc``: pool5 3x3 stride 1,
fc6 as a 3x3 conv dilated 6 (1024) and fc7 as a 1x1 conv (1024); then the extra blocks, each a 1x1 reduction and a
3x3 (or 4x4) conv (SSD300: conv8_2 .. conv11_2; SSD512 adds conv12_2). MMDetection's ``SSDVGG`` + ``SSDNeck``
compute the same layers under other names.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from detection.registry import MODELS

# VGG-16 ("D") up to conv5_3: output widths, "M" a 2x2 max pool (the third one in ceil mode).
VGG16_LAYOUT: tuple[int | str, ...] = (64, 64, "M", 128, 128, "M", 256, 256, 256, "C", 512, 512, 512, "M",
                                       512, 512, 512)
CONV4_3_END = 23  # features[:23] ends with conv4_3's ReLU; features[23] is pool4


def _xavier(module: nn.Module) -> None:
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.xavier_uniform_(m.weight)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


@MODELS.register_module()
class SSDVGG(nn.Module):
    """VGG-16 trunk and SSD extra layers, returning one feature map per prediction level.

    Args:
        extra_settings: one ``[mid_channels, out_channels, kernel, stride, padding]`` per extra block (1x1 conv
            to ``mid``, ReLU, ``kernel`` conv to ``out``, ReLU). SSD300 (torchvision / the paper):
            ``[[256, 512, 3, 2, 1], [128, 256, 3, 2, 1], [128, 256, 3, 1, 0], [128, 256, 3, 1, 0]]``.
        fc_channels: width of fc6 / fc7 (1024).
        l2_norm_scale: initial value of conv4_3's learned L2-norm scale (20).
        widen_factor: multiplies every width (tests build narrow models; 1.0 is VGG-16).
        in_channels: channels of the input image.

    Attributes:
        out_channels: per level: conv4_3 (512), fc7 (1024), then each extra block's ``out_channels``.

    Forward: ``[B, 3, H, W]`` float32 -> tuple of ``[B, C_l, H_l, W_l]`` (SSD300 at 300 px: 38, 19, 10, 5, 3, 1).
    """

    def __init__(
        self,
        extra_settings: Sequence[Sequence[int]],
        fc_channels: int = 1024,
        l2_norm_scale: float = 20.0,
        widen_factor: float = 1.0,
        in_channels: int = 3,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        if not widen_factor > 0:
            raise ValueError(f"{name}: widen_factor must be > 0, got {widen_factor!r}")
        settings = [[int(v) for v in s] for s in extra_settings]
        if not settings or any(len(s) != 5 for s in settings):
            raise ValueError(f"{name}: extra_settings must be a non-empty list of [mid_channels, out_channels, kernel, "
                             f"stride, padding], got {extra_settings!r}")

        def width(c: int) -> int:
            return max(1, int(c * widen_factor))

        layers: list[nn.Module] = []
        channels = in_channels
        for v in VGG16_LAYOUT:
            if isinstance(v, str):
                layers.append(nn.MaxPool2d(kernel_size=2, stride=2, ceil_mode=v == "C"))
            else:
                layers += [nn.Conv2d(channels, width(v), kernel_size=3, padding=1), nn.ReLU(inplace=True)]
                channels = width(v)
        conv4_3 = layers[CONV4_3_END - 2].out_channels
        self.features = nn.Sequential(*layers[:CONV4_3_END])
        self.scale_weight = nn.Parameter(torch.full((conv4_3,), float(l2_norm_scale)))
        fc_width = width(fc_channels)
        fc = nn.Sequential(
            nn.MaxPool2d(kernel_size=3, stride=1, padding=1),  # pool5
            nn.Conv2d(channels, fc_width, kernel_size=3, padding=6, dilation=6),  # fc6
            nn.ReLU(inplace=True),
            nn.Conv2d(fc_width, fc_width, kernel_size=1),  # fc7
            nn.ReLU(inplace=True),
        )
        blocks: list[nn.Module] = [nn.Sequential(*layers[CONV4_3_END:], fc)]
        out_channels = [conv4_3, fc_width]
        channels = fc_width
        for mid, out, kernel, stride, padding in settings:
            block = nn.Sequential(
                nn.Conv2d(channels, width(mid), kernel_size=1),
                nn.ReLU(inplace=True),
                nn.Conv2d(width(mid), width(out), kernel_size=kernel, stride=stride, padding=padding),
                nn.ReLU(inplace=True),
            )
            blocks.append(block)
            channels = width(out)
            out_channels.append(channels)
        self.extra = nn.ModuleList(blocks)
        self.out_channels = out_channels
        _xavier(self.extra)

    def forward(self, x: Tensor) -> tuple[Tensor, ...]:
        x = self.features(x)
        outs = [self.scale_weight.view(1, -1, 1, 1) * F.normalize(x)]
        for block in self.extra:
            x = block(x)
            outs.append(x)
        return tuple(outs)

