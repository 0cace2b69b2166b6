"""ICNet's neck: two cascade feature fusion (CFF) units merge the 1/32, 1/16 and 1/8 branches of ``ICNet``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from oars.models.backbones.base import init_conv_norm
from oars.models.layers import ConvNormAct
from segmentation.registry import MODELS

from ..utils import resize


class CascadeFeatureFusion(nn.Module):
    """CFF unit: upsample the low-resolution map to the high-resolution one, a dilated (2) 3x3 ConvNormAct on it,
    a 1x1 ConvNormAct on the high-resolution map, sum, ReLU.

    The dilated conv widens the receptive field of the upsampled coarse map at no extra resolution cost (the
    paper's Fig. 3); the pre-sum upsampled map is returned too, for cascade label guidance (auxiliary heads).
    """

    def __init__(
        self, low_channels: int, high_channels: int, out_channels: int, norm: Any = "BN", align_corners: bool = False
    ) -> None:
        super().__init__()
        self.align_corners = align_corners
        self.conv_low = ConvNormAct(low_channels, out_channels, 3, dilation=2, norm=norm)
        self.conv_high = ConvNormAct(high_channels, out_channels, 1, norm=norm)

    def forward(self, x_low: torch.Tensor, x_high: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x_low [B, low_channels, h, w], x_high [B, high_channels, H, W] -> (fused, upsampled low), both
        [B, out_channels, H, W] float."""
        x_low = self.conv_low(resize(x_low, x_high.shape[-2:], self.align_corners))
        return torch.relu(x_low + self.conv_high(x_high)), x_low


@MODELS.register_module()
class ICNeck(nn.Module):
    """``cff_24`` fuses sub4 into sub2, ``cff_12`` fuses that into sub1 (mmseg's ``ICNeck``).

    Input: ICNet's ``[sub1 (1/8), sub2 (1/16), sub4 (1/32)]``. Output (each [B, out_channels, ., .] float):
    ``[cff_24's upsampled sub4 (1/16), cff_12's upsampled fusion (1/8), cff_12's fusion (1/8)]``; the decode
    head reads index 2, the two auxiliary heads (cascade label guidance) indices 0 and 1.

    Args:
        in_channels: channels of sub1, sub2, sub4 (inferred from the backbone by the segmentor).
        out_channels: width of every CFF output.
    """

    def __init__(
        self,
        in_channels: Sequence[int] = (64, 256, 256),
        out_channels: int = 128,
        norm: Any = "BN",
        align_corners: bool = False,
    ) -> None:
        super().__init__()
        in_channels = [int(c) for c in in_channels]
        if len(in_channels) != 3:
            raise ValueError(f"ICNeck: in_channels must list 3 widths (sub1, sub2, sub4), got {in_channels}")
        if not isinstance(out_channels, int) or out_channels < 1:
            raise ValueError(f"ICNeck: out_channels must be a positive int, got {out_channels!r}")
        self.in_channels = in_channels
        self.cff_24 = CascadeFeatureFusion(in_channels[2], in_channels[1], out_channels, norm, align_corners)
        self.cff_12 = CascadeFeatureFusion(out_channels, in_channels[0], out_channels, norm, align_corners)
        self.out_channels = [out_channels] * 3
        init_conv_norm(self)

    def forward(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """``[sub1, sub2, sub4]`` -> ``[x_24 (sub2's size), x_12 (sub1's size), fused (sub1's size)]``."""
        if len(inputs) != 3:
            raise ValueError(f"ICNeck: expected 3 feature maps (sub1, sub2, sub4), got {len(inputs)}")
        sub1, sub2, sub4 = inputs
        fused_24, x_24 = self.cff_24(sub4, sub2)
        fused_12, x_12 = self.cff_12(fused_24, sub1)
        return [x_24, x_12, fused_12]
