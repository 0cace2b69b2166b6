"""SSDLite's MobileNetV3-Large feature extractor (Howard et al. 2019, Sec. 6.2), as torchvision's
``ssdlite320_mobilenet_v3_large`` builds it and with its parameter names.

oars' :class:`~oars.models.backbones.MobileNetV3` (large) provides the blocks; with ``reduced_tail`` (torchvision's
choice whenever the backbone is not ImageNet-initialised, hence in its COCO weights) the last stage is halved
(C5 160 -> 80 wide, expansions 960 -> 480, final 1x1 conv 480). Two feature maps come from the trunk, split as
torchvision splits it: ``features.0`` runs up to the expansion 1x1 conv of the first stride-32 block (C4, 672 ch,
stride 16), ``features.1`` the rest of that block and the trunk (C5, 480 ch, stride 32). Four extra blocks follow,
each 1x1 (ReLU6) -> depthwise 3x3 stride 2 (ReLU6) -> 1x1 (ReLU6), 512, 256, 256 and 128 wide.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor, nn

from detection.registry import MODELS
from oars.models.backbones.mobilenet_v2 import make_divisible
from oars.models.backbones.mobilenet_v3 import ARCH_SETTINGS, InvertedResidual, MobileNetV3
from oars.models.layers import ConvNormAct

C4_INDEX = 13  # features[13]: the first stride-32 block of MobileNetV3-Large


def _extra_block(in_channels: int, out_channels: int, norm: Any, act: Any) -> nn.Sequential:
    mid = out_channels // 2
    return nn.Sequential(
        ConvNormAct(in_channels, mid, 1, norm=norm, act=act),
        ConvNormAct(mid, mid, 3, stride=2, groups=mid, norm=norm, act=act),
        ConvNormAct(mid, out_channels, 1, norm=norm, act=act),
    )


def _normal_init(module: nn.Module, std: float) -> None:
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.normal_(m.weight, mean=0.0, std=std)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


@MODELS.register_module()
class SSDLiteMobileNetV3(nn.Module):
    """MobileNetV3-Large trunk (C4 expansion and C5 outputs) and SSDLite's depthwise-separable extra blocks.

    Args:
        extra_channels: output widths of the extra blocks (torchvision: 512, 256, 256, 128).
        widen_factor: MobileNetV3's width multiplier, also applied to the extra blocks (at least ``min_depth``).
        reduced_tail: halve the last stage (torchvision's SSDLite COCO model).
        min_depth: the narrowest extra block.
        norm: norm spec (the YAML sets torchvision's SSDLite values: BN eps 1e-3, momentum 0.03).
        extra_act: activation of the extra blocks (ReLU6).
        init_std: std of the normal initialisation of every conv (torchvision's ``_normal_init``: 0.03).

    Attributes:
        out_channels: 672, 480, then ``extra_channels`` (at width 1 with the reduced tail).

    Forward: ``[B, 3, H, W]`` -> tuple of 6 maps (at 320 px: 20, 10, 5, 3, 2, 1 cells).
    """

    def __init__(
        self,
        extra_channels: Sequence[int] = (512, 256, 256, 128),
        widen_factor: float = 1.0,
        reduced_tail: bool = True,
        min_depth: int = 16,
        norm: Any = "BN",
        extra_act: Any = "ReLU6",
        init_std: float = 0.03,
    ) -> None:
        super().__init__()
        trunk = MobileNetV3(arch="large", widen_factor=widen_factor, out_indices=(16,), norm=norm)
        blocks = list(trunk.features)
        if reduced_tail:
            blocks = blocks[:C4_INDEX] + self._reduced_tail(blocks[C4_INDEX - 1].out_channels, widen_factor, norm)
        c4 = blocks[C4_INDEX]
        if c4.use_res_connect:
            raise ValueError("SSDLiteMobileNetV3: the C4 block must not be residual")
        self.features = nn.Sequential(
            nn.Sequential(*blocks[:C4_INDEX], c4.block[0]),  # up to C4's expansion conv
            nn.Sequential(c4.block[1:], *blocks[C4_INDEX + 1:]),  # C4's depthwise conv to the final 1x1 conv
        )
        channels = [c4.block[0].out_channels, blocks[-1].out_channels]
        extras = []
        in_ch = channels[-1]
        for c in extra_channels:
            out = max(int(min_depth), int(c * widen_factor))
            extras.append(_extra_block(in_ch, out, norm, extra_act))
            in_ch = out
            channels.append(out)
        self.extra = nn.ModuleList(extras)
        self.out_channels = channels
        _normal_init(self, init_std)

    @staticmethod
    def _reduced_tail(in_channels: int, widen_factor: float, norm: Any) -> list[nn.Module]:
        """The last stage and final 1x1 conv with half-width outputs and expansions (torchvision's
        ``reduced_tail``: the first block keeps its 672 expansion)."""
        rows = ARCH_SETTINGS["large"][C4_INDEX - 1:]
        out: list[nn.Module] = []
        channels = in_channels
        for i, s in enumerate(rows):
            expanded = s.expanded if i == 0 else s.expanded // 2
            width = make_divisible(s.out // 2 * widen_factor)
            out.append(InvertedResidual(channels, make_divisible(expanded * widen_factor), width, s.kernel, s.stride,
                                        s.use_se, s.use_hs, norm))
            channels = width
        out.append(ConvNormAct(channels, 6 * channels, 1, norm=norm, act="Hardswish"))
        return out

    def forward(self, x: Tensor) -> tuple[Tensor, ...]:
        outs = []
        for block in self.features:
            x = block(x)
            outs.append(x)
        for block in self.extra:
            x = block(x)
            outs.append(x)
        return tuple(outs)
