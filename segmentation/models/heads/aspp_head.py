"""DeepLabV3 head (Chen et al. 2017): atrous spatial pyramid pooling, laid out like torchvision's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from oars.models.layers import ConvNormAct
from segmentation.registry import MODELS

from ..utils import resize
from .decode_head import BaseDecodeHead


class DepthwiseSeparableConv(nn.Sequential):
    """Depthwise kxk ConvNormAct (groups=in_channels) followed by a pointwise 1x1 ConvNormAct (mmseg/Xception)."""

    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, dilation: int = 1, norm: Any = "BN"
    ) -> None:
        super().__init__()
        self.depthwise = ConvNormAct(
            in_channels, in_channels, kernel_size, dilation=dilation, groups=in_channels, norm=norm
        )
        self.pointwise = ConvNormAct(in_channels, out_channels, 1, norm=norm)


class ASPPPooling(nn.Sequential):
    """Image-level features: global average pool -> 1x1 ConvNormAct -> broadcast back to the input size."""

    def __init__(self, in_channels: int, out_channels: int, norm: Any = "BN") -> None:
        super().__init__(nn.AdaptiveAvgPool2d(1), ConvNormAct(in_channels, out_channels, 1, norm=norm))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        size = x.shape[-2:]
        for module in self:
            x = module(x)
        # torchvision upsamples the 1x1 map with bilinear/align_corners=False, i.e. a broadcast.
        return resize(x, size, align_corners=False)


class ASPP(nn.Module):
    """1x1 conv + one 3x3 atrous conv per rate + image pooling, concatenated and projected.

    Children mirror torchvision's ``ASPP`` (``convs.0`` 1x1, ``convs.1..n`` atrous, ``convs.n+1`` pooling,
    ``project`` conv/BN/ReLU/Dropout(0.5)); with ``separable=True`` the atrous convs are depthwise-separable
    (DeepLabV3+).
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        dilations: Sequence[int],
        norm: Any = "BN",
        separable: bool = False,
        project_dropout: float = 0.5,
    ) -> None:
        super().__init__()
        branches: list[nn.Module] = [ConvNormAct(in_channels, out_channels, 1, norm=norm)]
        for d in dilations:
            if separable:
                branches.append(DepthwiseSeparableConv(in_channels, out_channels, 3, dilation=d, norm=norm))
            else:
                branches.append(ConvNormAct(in_channels, out_channels, 3, dilation=d, norm=norm))
        branches.append(ASPPPooling(in_channels, out_channels, norm=norm))
        self.convs = nn.ModuleList(branches)
        self.project = nn.Sequential(
            ConvNormAct(len(branches) * out_channels, out_channels, 1, norm=norm), nn.Dropout(project_dropout)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.project(torch.cat([branch(x) for branch in self.convs], dim=1))


@MODELS.register_module()
class ASPPHead(BaseDecodeHead):
    """DeepLabV3: ASPP(rates ``dilations``) -> 3x3 ConvNormAct -> 1x1 classifier.

    Structurally identical to torchvision's ``DeepLabHead`` (hence ``dropout_ratio=0.0`` before the
    classifier: torchvision has none; the ASPP projection has its Dropout(0.5)), so torchvision
    ``deeplabv3_resnet*`` weights load through ``convert_torchvision_deeplabv3``. The paper's rates
    (12, 24, 36) are for output stride 8; use (6, 12, 18) at output stride 16.
    """

    def __init__(
        self,
        in_channels: int | Sequence[int],
        num_classes: int,
        channels: int = 256,
        dilations: Sequence[int] = (12, 24, 36),
        dropout_ratio: float = 0.0,
        in_index: int | Sequence[int] = -1,
        **kwargs: Any,
    ) -> None:
        if not isinstance(in_index, int):
            raise ValueError(f"ASPPHead takes one input feature: in_index must be an int, got {in_index!r}")
        super().__init__(in_channels, channels, num_classes, in_index=in_index, dropout_ratio=dropout_ratio, **kwargs)
        self.dilations = tuple(int(d) for d in dilations)
        self.aspp = ASPP(self.in_channels, channels, self.dilations, norm=self.norm)
        self.bottleneck = ConvNormAct(channels, channels, 3, norm=self.norm)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        return self.bottleneck(self.aspp(x))
