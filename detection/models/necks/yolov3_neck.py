"""YOLOv3's neck: 5-conv detection blocks joined top-down by 1x1 conv + 2x upsampling + concatenation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from detection.registry import MODELS
from oars.models.layers import ConvNormAct

LEAKY = {"type": "LeakyReLU", "negative_slope": 0.1}


class DetectionBlock(nn.Module):
    """1x1 (c) -> 3x3 (2c) -> 1x1 (c) -> 3x3 (2c) -> 1x1 (c): the "conv set" before each YOLOv3 output."""

    def __init__(self, in_channels: int, out_channels: int, norm: Any = "BN", act: Any = LEAKY) -> None:
        super().__init__()
        double = out_channels * 2
        self.conv1 = ConvNormAct(in_channels, out_channels, 1, norm=norm, act=act)
        self.conv2 = ConvNormAct(out_channels, double, 3, norm=norm, act=act)
        self.conv3 = ConvNormAct(double, out_channels, 1, norm=norm, act=act)
        self.conv4 = ConvNormAct(out_channels, double, 3, norm=norm, act=act)
        self.conv5 = ConvNormAct(double, out_channels, 1, norm=norm, act=act)

    def forward(self, x: Tensor) -> Tensor:
        return self.conv5(self.conv4(self.conv3(self.conv2(self.conv1(x)))))


@MODELS.register_module()
class YOLOv3Neck(nn.Module):
    """FPN-like YOLOv3 neck.

    Args:
        in_channels: channels of the backbone's maps, shallowest first (strides 8, 16, 32 for DarkNet-53:
            ``[256, 512, 1024]``); inferred from the backbone by the detector.
        out_channels: channels of the outputs, deepest first; default half of each input's
            (``[512, 256, 128]`` for DarkNet-53).
        in_strides: strides of the inputs, shallowest first (default 8, 16, 32, ... doubling); only
            reported back, reversed, as ``out_strides``.
        norm, act: specs of every conv (BN and LeakyReLU(0.1) as in the paper).

    Returns a tuple of maps from the deepest (stride 32) to the shallowest, as the head expects.
    """

    def __init__(
        self,
        in_channels: Sequence[int],
        out_channels: Sequence[int] | None = None,
        in_strides: Sequence[int] | None = None,
        norm: Any = "BN",
        act: Any = LEAKY,
    ) -> None:
        super().__init__()
        if isinstance(in_channels, int) or not in_channels:
            raise ValueError(f"YOLOv3Neck: in_channels must be a non-empty list (one per level), got {in_channels!r}")
        num = len(in_channels)
        rev_in = [int(c) for c in reversed(list(in_channels))]
        if out_channels is None:
            out_channels = [max(c // 2, 1) for c in rev_in]
        out_channels = [int(c) for c in out_channels]
        if len(out_channels) != num:
            raise ValueError(
                f"YOLOv3Neck: out_channels={out_channels} has {len(out_channels)} entries but the backbone gives "
                f"{num} feature maps (in_channels={list(in_channels)}); give one per level, deepest first"
            )
        if in_strides is None:
            in_strides = [2 ** (3 + i) for i in range(num)]
        if len(in_strides) != num:
            raise ValueError(f"YOLOv3Neck: in_strides={list(in_strides)} must have {num} entries, one per input")
        self.in_channels = list(in_channels)
        self.out_channels = out_channels
        self.out_strides = [int(s) for s in reversed(list(in_strides))]

        self.detect = nn.ModuleList([DetectionBlock(rev_in[0], out_channels[0], norm, act)])
        self.lateral = nn.ModuleList()
        for i in range(1, num):
            self.lateral.append(ConvNormAct(out_channels[i - 1], out_channels[i], 1, norm=norm, act=act))
            self.detect.append(DetectionBlock(rev_in[i] + out_channels[i], out_channels[i], norm, act))

    def forward(self, feats: Sequence[Tensor]) -> tuple[Tensor, ...]:
        if len(feats) != len(self.in_channels):
            raise ValueError(
                f"YOLOv3Neck: got {len(feats)} feature maps, built for {len(self.in_channels)} "
                f"(in_channels={self.in_channels})"
            )
        feats = list(feats)[::-1]
        x = self.detect[0](feats[0])
        outs = [x]
        for i in range(1, len(feats)):
            up = F.interpolate(self.lateral[i - 1](x), size=feats[i].shape[-2:], mode="nearest")
            x = self.detect[i](torch.cat([up, feats[i]], dim=1))
            outs.append(x)
        return tuple(outs)
