"""ICNet (Zhao et al. 2018, "ICNet for Real-Time Semantic Segmentation on High-Resolution Images") as a
backbone, laid out like mmsegmentation's ``ICNet``: three branches at three input resolutions.

* sub1: the full image through a light branch of three stride-2 3x3 convs (1/8 of the input);
* sub2: the image at 1/2 through a dilated ResNet's stem, ``layer1`` and ``layer2`` (1/16 of the input);
* sub4: the sub2 feature at 1/2 again through ``layer3`` and ``layer4`` (dilated, so 1/32 of the input) and a
  pyramid pooling module (bins 1, 2, 3, 6) whose branches are concatenated with the feature and fused by a
  3x3 bottleneck.

The ResNet is shared by the 1/2 and 1/4 inputs (its two halves run on them in cascade), so only the 1/4
input pays for the deep stages. ``ICNeck`` (``segmentation.models.necks``) fuses the three outputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from oars.models.backbones.base import init_conv_norm
from oars.models.layers import ConvNormAct
from segmentation.registry import MODELS

from ..heads.psp_head import PyramidPoolingModule


def build_icnet_resnet(cfg: dict[str, Any]) -> nn.Module:
    """The ResNet of ``backbone_cfg`` with all four stages built (``variant: c`` is mmseg's ResNetV1c: deep stem,
    strided-conv shortcut, what its ICNet uses)."""
    if not isinstance(cfg, dict):
        raise ValueError(f"ICNet: backbone_cfg must be a dict of ResNet arguments, got {cfg!r}")
    cfg = dict(cfg)
    cfg.setdefault("type", "ResNet")
    indices = cfg.setdefault("out_indices", [0, 1, 2, 3])
    if list(indices) != [0, 1, 2, 3]:
        raise ValueError(
            f"ICNet: backbone_cfg.out_indices must be [0, 1, 2, 3] (ICNet runs every stage), got {list(indices)}"
        )
    resnet = MODELS.build(cfg)
    for attr in ("forward_stem", "layer1", "layer2", "layer3", "layer4", "maxpool"):
        if not hasattr(resnet, attr):
            raise ValueError(f"ICNet: backbone_cfg type {cfg['type']!r} is not a ResNet (no {attr!r})")
    return resnet


@MODELS.register_module()
class ICNet(nn.Module):
    """Image cascade backbone: returns ``[sub1, sub2, sub4]`` features at strides ``[8, 16, 32]`` of the input,
    [B, out_channels[i], ceil(H / stride), ceil(W / stride)] float (up to rounding of the half-size inputs).

    Args:
        backbone_cfg: arguments of the shared ``ResNet`` (``type`` defaults to ResNet; ``variant: c`` builds
            mmseg's ResNetV1c; use ``output_stride: 8`` for the dilated "d8" layout). Its stage-2 and stage-4
            widths (mmseg's ``layer_channels``: 512/2048 for R50, 128/512 for R18) are read from it.
        in_channels: image channels.
        light_branch_middle_channels: width of the first two convs of the full-resolution branch.
        psp_out_channels: width of each pyramid pooling branch and of the bottleneck after them.
        out_channels: channels of the three outputs (sub1, sub2, sub4).
        pool_scales: pyramid pooling bin counts.
        norm: norm spec of ICNet's own layers (the ResNet takes its own ``norm`` in ``backbone_cfg``).
        align_corners: of the bilinear resizes (inputs and pyramid pooling).
    """

    def __init__(
        self,
        backbone_cfg: dict[str, Any],
        in_channels: int = 3,
        light_branch_middle_channels: int = 32,
        psp_out_channels: int = 512,
        out_channels: Sequence[int] = (64, 256, 256),
        pool_scales: Sequence[int] = (1, 2, 3, 6),
        norm: Any = "BN",
        align_corners: bool = False,
    ) -> None:
        super().__init__()
        out_channels = [int(c) for c in out_channels]
        if len(out_channels) != 3:
            raise ValueError(f"ICNet: out_channels must list 3 widths (sub1, sub2, sub4), got {out_channels}")
        scales = tuple(pool_scales)
        if not scales or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in scales):
            raise ValueError(f"ICNet: pool_scales must be a non-empty list of positive ints, got {pool_scales!r}")
        self.align_corners = align_corners
        self.backbone = build_icnet_resnet(backbone_cfg)
        # ceil_mode keeps the last row/column of odd-sized maps (mmseg does the same for ICNet).
        self.backbone.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1, ceil_mode=True)
        layer2_channels, layer4_channels = self.backbone.out_channels[1], self.backbone.out_channels[3]

        mid = light_branch_middle_channels
        self.conv_sub1 = nn.Sequential(
            ConvNormAct(in_channels, mid, 3, stride=2, norm=norm),
            ConvNormAct(mid, mid, 3, stride=2, norm=norm),
            ConvNormAct(mid, out_channels[0], 3, stride=2, norm=norm),
        )
        self.conv_sub2 = ConvNormAct(layer2_channels, out_channels[1], 1, norm=norm)
        self.psp_modules = PyramidPoolingModule(
            layer4_channels, psp_out_channels, scales, norm=norm, align_corners=align_corners
        )
        self.psp_bottleneck = ConvNormAct(layer4_channels + len(scales) * psp_out_channels, psp_out_channels, 3,
                                          norm=norm)
        self.conv_sub4 = ConvNormAct(psp_out_channels, out_channels[2], 1, norm=norm)
        self.out_channels = out_channels
        # sub2 sees the 1/2 image; sub4 a further 1/2 of layer2's output, then layer3/4's extra stride
        self.out_strides = [8, 2 * self.backbone.out_strides[1], 4 * self.backbone.out_strides[3]]
        for module in (self.conv_sub1, self.conv_sub2, self.psp_modules, self.psp_bottleneck, self.conv_sub4):
            init_conv_norm(module)  # the ResNet initialised itself

    def init_weights(self) -> None:
        """Pretrained weights of the ResNet (its ``init``), when training starts (mmengine calls this)."""
        self.backbone.init_weights()

    def _half(self, x: torch.Tensor) -> torch.Tensor:
        return F.interpolate(x, scale_factor=0.5, mode="bilinear", align_corners=self.align_corners)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Images [B, C, H, W] -> ``[sub1 (1/8), sub2 (1/16), sub4 (1/32)]`` float feature maps."""
        sub1 = self.conv_sub1(x)
        r = self.backbone
        y = r.layer2(r.layer1(r.forward_stem(self._half(x))))
        sub2 = self.conv_sub2(y)
        y = r.layer4(r.layer3(self._half(y)))
        # mmseg's order (pooled branches, then the feature), so the bottleneck weights of its checkpoints fit
        y = self.psp_bottleneck(torch.cat([*self.psp_modules(y), y], dim=1))
        return [sub1, sub2, self.conv_sub4(y)]
