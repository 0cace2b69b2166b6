"""BiSeNetV2 (Yu et al. 2021, "BiSeNet V2: Bilateral Network with Guided Aggregation for Real-time Semantic
Segmentation") laid out like mmsegmentation's ``BiSeNetV2`` backbone.

Two branches see the full image: a wide, shallow *detail* branch (1/8, spatial detail) and a narrow, deep
*semantic* branch (stem, gather-and-expansion layers down to 1/32, context embedding: high-level context).
A bilateral guided aggregation (BGA) layer fuses them, each branch gating the other with a sigmoid. The
semantic stages are returned too, for the "booster" auxiliary heads used in training.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from oars.models.backbones.base import init_conv_norm
from oars.models.layers import ConvNormAct, build_norm_layer
from segmentation.registry import MODELS

from ..utils import resize


def _dw_separable(in_channels: int, out_channels: int, stride: int, norm: Any, pw_norm: bool) -> nn.Sequential:
    """Depthwise 3x3 conv + norm (no activation) -> pointwise 1x1 conv (+ norm when ``pw_norm``, else with a
    bias), no activation: the linear separable conv of BiSeNetV2's shortcuts and BGA."""
    return nn.Sequential(
        ConvNormAct(in_channels, in_channels, 3, stride=stride, groups=in_channels, norm=norm, act=None),
        ConvNormAct(in_channels, out_channels, 1, norm=norm if pw_norm else None, act=None),
    )


class DetailBranch(nn.Module):
    """Three stages, each a stride-2 3x3 ConvNormAct then one (stage 1) or two more at stride 1: 1/8 resolution,
    ``detail_channels[-1]`` channels."""

    def __init__(self, detail_channels: Sequence[int], in_channels: int = 3, norm: Any = "BN") -> None:
        super().__init__()
        stages, prev = [], in_channels
        for i, ch in enumerate(detail_channels):
            convs = [ConvNormAct(prev, ch, 3, stride=2, norm=norm)]
            convs += [ConvNormAct(ch, ch, 3, norm=norm) for _ in range(1 if i == 0 else 2)]
            stages.append(nn.Sequential(*convs))
            prev = ch
        self.detail_branch = nn.ModuleList(stages)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for stage in self.detail_branch:
            x = stage(x)
        return x


class StemBlock(nn.Module):
    """Semantic stem (1/4): a stride-2 3x3 conv, then two parallel downsamplings (1x1 -> stride-2 3x3 convs, and
    a 3x3 max-pool) concatenated and fused by a 3x3 conv."""

    def __init__(self, in_channels: int, out_channels: int, norm: Any = "BN") -> None:
        super().__init__()
        self.conv_first = ConvNormAct(in_channels, out_channels, 3, stride=2, norm=norm)
        self.convs = nn.Sequential(
            ConvNormAct(out_channels, out_channels // 2, 1, norm=norm),
            ConvNormAct(out_channels // 2, out_channels, 3, stride=2, norm=norm),
        )
        self.pool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.fuse_last = ConvNormAct(2 * out_channels, out_channels, 3, norm=norm)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv_first(x)
        return self.fuse_last(torch.cat([self.convs(x), self.pool(x)], dim=1))


class GELayer(nn.Module):
    """Gather-and-expansion layer: 3x3 conv (gather) -> depthwise 3x3 expanding the channels ``exp_ratio``
    times (two depthwise convs, the first at stride 2, when downsampling) -> 1x1 projection (no activation),
    plus the input (or, at stride 2, a linear depthwise-separable shortcut), then ReLU."""

    def __init__(self, in_channels: int, out_channels: int, exp_ratio: int = 6, stride: int = 1,
                 norm: Any = "BN") -> None:
        super().__init__()
        if stride == 1 and in_channels != out_channels:
            raise ValueError(f"GELayer: a stride-1 layer keeps the width, got {in_channels} -> {out_channels}")
        mid = in_channels * exp_ratio
        self.conv1 = ConvNormAct(in_channels, in_channels, 3, norm=norm)
        if stride == 1:
            self.dwconv = nn.Sequential(ConvNormAct(in_channels, mid, 3, groups=in_channels, norm=norm))
            self.shortcut: nn.Module | None = None
        else:
            self.dwconv = nn.Sequential(
                ConvNormAct(in_channels, mid, 3, stride=stride, groups=in_channels, norm=norm, act=None),
                ConvNormAct(mid, mid, 3, groups=mid, norm=norm),
            )
            self.shortcut = _dw_separable(in_channels, out_channels, stride, norm, pw_norm=True)
        self.conv2 = nn.Sequential(ConvNormAct(mid, out_channels, 1, norm=norm, act=None))
        self.act = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.conv2(self.dwconv(self.conv1(x)))
        return self.act(out + (x if self.shortcut is None else self.shortcut(x)))


class CEBlock(nn.Module):
    """Context embedding: global average pool -> norm -> 1x1 ConvNormAct, broadcast-added to the input, then a
    3x3 ConvNormAct."""

    def __init__(self, in_channels: int, out_channels: int, norm: Any = "BN") -> None:
        super().__init__()
        if in_channels != out_channels:
            raise ValueError(f"CEBlock adds its input back, so in/out widths must match: {in_channels}/{out_channels}")
        self.gap = nn.Sequential(nn.AdaptiveAvgPool2d(1), build_norm_layer(norm, in_channels))
        self.conv_gap = ConvNormAct(in_channels, out_channels, 1, norm=norm)
        self.conv_last = ConvNormAct(out_channels, out_channels, 3, norm=norm)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv_last(x + self.conv_gap(self.gap(x)))


class SemanticBranch(nn.Module):
    """``stage1`` StemBlock (1/4), then per further width a stride-2 GELayer and one (three for the last) stride-1
    GELayers (1/8, 1/16, 1/32), then ``stage{n}_CEBlock``. Returns every stage's output, CE block last."""

    def __init__(self, semantic_channels: Sequence[int], in_channels: int = 3, exp_ratio: int = 6,
                 norm: Any = "BN") -> None:
        super().__init__()
        self.stage_names: list[str] = []
        n = len(semantic_channels)
        for i, ch in enumerate(semantic_channels):
            name = f"stage{i + 1}"
            if i == 0:
                stage: nn.Module = StemBlock(in_channels, ch, norm)
            else:
                repeats = 3 if i == n - 1 else 1
                layers = [GELayer(semantic_channels[i - 1], ch, exp_ratio, 2, norm)]
                layers += [GELayer(ch, ch, exp_ratio, 1, norm) for _ in range(repeats)]
                stage = nn.Sequential(*layers)
            self.add_module(name, stage)
            self.stage_names.append(name)
        name = f"stage{n}_CEBlock"
        self.add_module(name, CEBlock(semantic_channels[-1], semantic_channels[-1], norm))
        self.stage_names.append(name)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        outs = []
        for name in self.stage_names:
            x = getattr(self, name)(x)
            outs.append(x)
        return outs


class BGALayer(nn.Module):
    """Bilateral guided aggregation: detail (1/8) and semantic (1/32) features gate each other at both
    resolutions (``detail * sigmoid(up(semantic))`` at 1/8, ``down(detail) * sigmoid(semantic)`` at 1/32,
    upsampled), summed and fused by a 3x3 ConvNormAct; output at the detail branch's resolution."""

    def __init__(self, channels: int, norm: Any = "BN", align_corners: bool = False) -> None:
        super().__init__()
        self.align_corners = align_corners
        self.detail_dwconv = nn.Sequential(_dw_separable(channels, channels, 1, norm, pw_norm=False))
        self.detail_down = nn.Sequential(
            ConvNormAct(channels, channels, 3, stride=2, norm=norm, act=None),
            nn.AvgPool2d(kernel_size=3, stride=2, padding=1),
        )
        self.semantic_conv = nn.Sequential(ConvNormAct(channels, channels, 3, norm=norm, act=None))
        self.semantic_dwconv = nn.Sequential(_dw_separable(channels, channels, 1, norm, pw_norm=False))
        self.conv = ConvNormAct(channels, channels, 3, norm=norm)

    def forward(self, x_d: torch.Tensor, x_s: torch.Tensor) -> torch.Tensor:
        """x_d [B, C, H/8, W/8], x_s [B, C, H/32, W/32] -> [B, C, H/8, W/8]."""
        detail = self.detail_dwconv(x_d)
        size = detail.shape[-2:]
        fuse_1 = detail * torch.sigmoid(resize(self.semantic_conv(x_s), size, self.align_corners))
        fuse_2 = self.detail_down(x_d) * torch.sigmoid(self.semantic_dwconv(x_s))
        return self.conv(fuse_1 + resize(fuse_2, size, self.align_corners))


@MODELS.register_module()
class BiSeNetV2(nn.Module):
    """BiSeNetV2 backbone.

    ``forward`` returns, for ``out_indices`` over ``[BGA output (1/8, bga_channels), stem (1/4), semantic
    stage 2 (1/8), stage 3 (1/16), stage 4 (1/32)]``, float maps [B, out_channels[i], ceil(H/s), ceil(W/s)]:
    the decode head reads index 0, the booster auxiliary heads 1..4.

    Args:
        detail_channels: widths of the detail branch's three stages.
        semantic_channels: widths of the semantic stem and its three GE stages.
        semantic_expansion_ratio: GE layers' depthwise expansion.
        bga_channels: BGA width; must equal ``detail_channels[-1]`` and ``semantic_channels[-1]``.
        out_indices: which of the five features to return.
        norm: norm spec of every layer (mmseg builds the backbone with plain BN).
        align_corners: of BGA's bilinear upsampling.
    """

    def __init__(
        self,
        in_channels: int = 3,
        detail_channels: Sequence[int] = (64, 64, 128),
        semantic_channels: Sequence[int] = (16, 32, 64, 128),
        semantic_expansion_ratio: int = 6,
        bga_channels: int = 128,
        out_indices: Sequence[int] = (0, 1, 2, 3, 4),
        norm: Any = "BN",
        align_corners: bool = False,
    ) -> None:
        super().__init__()
        detail_channels, semantic_channels = list(detail_channels), list(semantic_channels)
        if len(detail_channels) != 3 or len(semantic_channels) != 4:
            raise ValueError(
                "BiSeNetV2: detail_channels must list 3 widths and semantic_channels 4, got "
                f"{detail_channels} and {semantic_channels}"
            )
        if not detail_channels[-1] == semantic_channels[-1] == bga_channels:
            raise ValueError(
                "BiSeNetV2: the BGA layer fuses the last detail and semantic features, so detail_channels[-1] "
                f"({detail_channels[-1]}), semantic_channels[-1] ({semantic_channels[-1]}) and bga_channels "
                f"({bga_channels}) must be equal"
            )
        all_channels = [bga_channels, *semantic_channels]
        self.out_indices = [int(i) for i in out_indices]
        if not self.out_indices or any(not 0 <= i < len(all_channels) for i in self.out_indices):
            raise ValueError(f"BiSeNetV2: out_indices must be a non-empty list of ints in 0..4, got {out_indices!r}")
        self.detail = DetailBranch(detail_channels, in_channels, norm)
        self.semantic = SemanticBranch(semantic_channels, in_channels, semantic_expansion_ratio, norm)
        self.bga = BGALayer(bga_channels, norm, align_corners)
        self.out_channels = [all_channels[i] for i in self.out_indices]
        self.out_strides = [[8, 4, 8, 16, 32][i] for i in self.out_indices]
        init_conv_norm(self)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Images [B, C, H, W] -> the ``out_indices`` features (see the class docstring)."""
        semantic = self.semantic(x)
        outs = [self.bga(self.detail(x), semantic[-1]), *semantic[:-1]]
        return tuple(outs[i] for i in self.out_indices)
