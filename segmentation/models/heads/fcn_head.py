"""FCN head (Long et al. 2015): a few convs and a 1x1 classifier on one feature map."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from oars.models.layers import ConvNormAct
from segmentation.registry import MODELS

from .decode_head import BaseDecodeHead, select_in_channels


@MODELS.register_module()
class FCNHead(BaseDecodeHead):
    """``num_convs`` ConvNormAct(kernel_size, dilation) [-> concat with the input -> ConvNormAct] -> classifier.

    The defaults (one 3x3 conv to ``in_channels // 4`` channels, dropout 0.1, no concat) are
    torchvision's ``FCNHead``, the auxiliary head of its DeepLabV3/FCN models, so its weights load
    (see ``segmentation.models.converters``). mmseg's FCN is ``num_convs=2, concat_input=True``.
    """

    def __init__(
        self,
        in_channels: int | Sequence[int],
        num_classes: int,
        channels: int | None = None,
        num_convs: int = 1,
        kernel_size: int = 3,
        concat_input: bool = False,
        dilation: int = 1,
        in_index: int | Sequence[int] = -1,
        **kwargs: Any,
    ) -> None:
        if not isinstance(in_index, int):
            raise ValueError(f"FCNHead takes one input feature: in_index must be an int, got {in_index!r}")
        if num_convs < 0:
            raise ValueError(f"FCNHead: num_convs must be >= 0, got {num_convs}")

        in_ch = select_in_channels(in_channels, in_index, "FCNHead")
        if channels is None:
            channels = in_ch // 4
        if num_convs == 0 and channels != in_ch:
            raise ValueError(
                f"FCNHead with num_convs=0 classifies the input directly, so channels ({channels}) must equal "
                f"the input channels ({in_ch})"
            )
        super().__init__(in_ch, channels, num_classes, in_index=in_index, **kwargs)
        self.num_convs = num_convs
        self.concat_input = concat_input
        self.kernel_size = kernel_size
        convs = [
            ConvNormAct(in_ch if i == 0 else channels, channels, kernel_size, dilation=dilation, norm=self.norm)
            for i in range(num_convs)
        ]
        self.convs = nn.Sequential(*convs) if convs else nn.Identity()
        if concat_input:
            self.conv_cat = ConvNormAct(in_ch + channels, channels, kernel_size, norm=self.norm)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        out = self.convs(x)
        if self.concat_input:
            out = self.conv_cat(torch.cat([x, out], dim=1))
        return out
