"""C-TCN's concept-wise temporal network: a ResNet bottleneck trunk whose kernels span time only, run on the
feature sequence as a one-channel [T, concepts] image, and a temporal feature pyramid (top-down FPN plus extra
strided levels), as PaddleVideo's ``fpn_ctcn.FPNCTCN.extractor``.

Why "concept-wise": a (k, 1) kernel slides along time and never mixes two concepts (feature columns, e.g. the 201
class scores of the RGB and of the flow stream), so every concept gets the same temporal filters; concepts are
combined only by the heads' (1, concepts) kernels.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch.nn.functional as F
from torch import Tensor, nn

from video.registry import MODELS


def temporal_conv(cin: int, cout: int, kernel: int, stride: int = 1, bias: bool = True) -> nn.Conv2d:
    """A (kernel, 1) convolution over [B, C, T, concepts], 'same' padding along time, stride along time only."""
    return nn.Conv2d(cin, cout, kernel_size=(kernel, 1), stride=(stride, 1), padding=(kernel // 2, 0), bias=bias)


class ConvBN(nn.Sequential):
    """Bias-free temporal conv + BatchNorm (+ ReLU): PaddleVideo's ``conv_bn_layer``."""

    def __init__(self, cin: int, cout: int, kernel: int, stride: int = 1, relu: bool = True) -> None:
        layers: list[nn.Module] = [temporal_conv(cin, cout, kernel, stride, bias=False), nn.BatchNorm2d(cout)]
        if relu:
            layers.append(nn.ReLU(inplace=True))
        super().__init__(*layers)


class TemporalBottleneck(nn.Module):
    """ResNet bottleneck (1 -> (3, 1) strided -> 1, expansion 4) with a projection shortcut where the shape
    changes; the stride sits on the (3, 1) conv as in PaddleVideo."""

    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        cout = planes * self.expansion
        self.conv1 = ConvBN(cin, planes, 1)
        self.conv2 = ConvBN(planes, planes, 3, stride)
        self.conv3 = ConvBN(planes, cout, 1, relu=False)
        self.shortcut = ConvBN(cin, cout, 1, stride, relu=False) if (cin != cout or stride != 1) else nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(self.shortcut(x) + self.conv3(self.conv2(self.conv1(x))))


@MODELS.register_module()
class ConceptTCN(nn.Module):
    """Trunk + temporal pyramid of C-TCN.

    * Stem: ``stem_channels`` (32, 64) conv (7, 1) stride 2 + BN + ReLU each (time / 4).
    * Stages: bottleneck stages of ``stage_blocks`` blocks (3, 4, 6, 3) at ``stage_planes`` (64, 128, 256, 512),
      strides 1, 2, 2, 2 (C2..C5: time / 4 .. / 32).
    * Pyramid: lateral 1x1 convs to ``fpn_channels`` (512) on C2..C5, top-down bilinear upsampling along time
      (``align_corners=True``, Paddle's ``image_resize`` default) and sum, a (3, 1) smoothing conv on P2..P4 (not
      P5); ``num_extra_levels`` (4) strided (3, 1) convs from C5, a ReLU before each but the first (P6..P9).

    Levels P2 .. P(5 + num_extra_levels), finest first, each [B, fpn_channels, T / stride, concepts], strides
    4, 8, ..., 2 ** (2 + levels). Convs of the pyramid have biases, the trunk's do not (BN follows).

    Args:
        stem_channels, stage_blocks, stage_planes, fpn_channels, num_extra_levels: as above.
    """

    def __init__(self, stem_channels: Sequence[int] = (32, 64), stage_blocks: Sequence[int] = (3, 4, 6, 3),
                 stage_planes: Sequence[int] = (64, 128, 256, 512), fpn_channels: int = 512,
                 num_extra_levels: int = 4) -> None:
        super().__init__()
        if len(stem_channels) != 2 or len(stage_blocks) != 4 or len(stage_planes) != 4 or num_extra_levels < 0:
            raise ValueError("ConceptTCN: stem_channels needs 2 widths, stage_blocks and stage_planes 4 entries "
                             f"and num_extra_levels >= 0, got {stem_channels}, {stage_blocks}, {stage_planes}, "
                             f"{num_extra_levels}")
        self.stem = nn.Sequential(ConvBN(1, stem_channels[0], 7, 2), ConvBN(stem_channels[0], stem_channels[1], 7, 2))
        cin = stem_channels[1]
        stages, widths = [], []
        for i, (blocks, planes) in enumerate(zip(stage_blocks, stage_planes)):
            layers = []
            for j in range(blocks):
                layers.append(TemporalBottleneck(cin, planes, 2 if (i > 0 and j == 0) else 1))
                cin = planes * TemporalBottleneck.expansion
            stages.append(nn.Sequential(*layers))
            widths.append(cin)
        self.stages = nn.ModuleList(stages)
        self.lateral = nn.ModuleList(nn.Conv2d(w, fpn_channels, 1) for w in widths)
        self.smooth = nn.ModuleList(temporal_conv(fpn_channels, fpn_channels, 3) for _ in range(3))
        self.extra = nn.ModuleList(temporal_conv(widths[-1] if k == 0 else fpn_channels, fpn_channels, 3, 2)
                                   for k in range(num_extra_levels))
        self.out_channels = fpn_channels
        self.strides = [4 * 2 ** k for k in range(4 + num_extra_levels)]

    def forward(self, x: Tensor) -> list[Tensor]:
        """float [B, 1, T, concepts] -> the pyramid levels (finest first), [B, fpn_channels, T_l, concepts]."""
        c = self.stem(x)
        feats = []
        for stage in self.stages:
            c = stage(c)
            feats.append(c)
        p = self.lateral[3](feats[3])
        tops = [p]
        for k in (2, 1, 0):
            p = F.interpolate(p, size=feats[k].shape[-2:], mode="bilinear", align_corners=True) + self.lateral[k](
                feats[k])
            tops.append(p)
        p5, p4, p3, p2 = tops
        levels = [self.smooth[2](p2), self.smooth[1](p3), self.smooth[0](p4), p5]
        e = feats[3]
        for k, conv in enumerate(self.extra):
            e = conv(e if k == 0 else F.relu(e))
            levels.append(e)
        return levels
