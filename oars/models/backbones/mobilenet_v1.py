"""MobileNetV1 (Howard et al., 2017) as a multi-scale backbone, laid out like PaddleDetection's YOLOv3 option.

``features.0`` is the 3x3 stride-2 stem conv (32 ch); ``features.1..13`` are the 13 depthwise-separable
blocks, each a ``Sequential`` of a depthwise 3x3 ``ConvNormAct`` (``.0``, carrying the stride) and a
pointwise 1x1 ``ConvNormAct`` (``.1``). Every conv is followed by norm + ReLU.

Indices (``out_indices``, ``frozen_stages``) are positions in ``features``; at ``widen_factor=1``:
0 -> 32 ch / stride 2, 1 -> 64 / 2, 2 -> 128 / 4, 3 -> 128 / 4, 4 -> 256 / 8, 5 -> 256 / 8,
6 -> 512 / 16, 7..11 -> 512 / 16, 12 -> 1024 / 32, 13 -> 1024 / 32. The default ``(4, 6, 13)``
(PaddleDetection's ``feature_maps: [4, 6, 13]``) gives 256 / 512 / 1024 channels at strides 8 / 16 / 32.
Blocks after the last requested index are not built.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor, nn

from oars.registry import MODELS

from ..layers import ConvNormAct
from ..layers.activation import ActSpec, build_activation_layer
from ..layers.norm import NormSpec, norm_type
from ..utils import check_frozen_stages, check_out_indices
from .base import Backbone, forward_features

STEM_CHANNELS = 32
# (output channels, stride of the depthwise conv) of the 13 depthwise-separable blocks
BLOCKS = (
    (64, 1),
    (128, 2),
    (128, 1),
    (256, 2),
    (256, 1),
    (512, 2),
    (512, 1),
    (512, 1),
    (512, 1),
    (512, 1),
    (512, 1),
    (1024, 2),
    (1024, 1),
)
NUM_INDICES = len(BLOCKS) + 1  # the stem plus the blocks


def depthwise_separable(
    in_channels: int, out_channels: int, stride: int, norm: NormSpec, act: ActSpec
) -> nn.Sequential:
    """Depthwise 3x3 (stride) -> pointwise 1x1, each with norm and activation."""
    return nn.Sequential(
        ConvNormAct(in_channels, in_channels, 3, stride=stride, groups=in_channels, norm=norm, act=act),
        ConvNormAct(in_channels, out_channels, 1, norm=norm, act=act),
    )


@MODELS.register_module()
class MobileNetV1(Backbone):
    """MobileNetV1 backbone returning one feature map per ``out_indices`` entry (see module docstring).

    Args:
        widen_factor: width multiplier; every width is ``int(c * widen_factor)`` (PaddleDetection's ``scale``).
        in_channels: channels of the input image.
        out_indices: 0 = stem, 1..13 = depthwise-separable blocks; strictly increasing.
        frozen_stages: -1 none, 0 the stem, k the stem and blocks 1..k (no grad, eval mode).
        norm: norm spec for every norm layer. act: activation spec (default ReLU).
        norm_eval: keep every batch-norm layer in eval mode while training.
        init: ``{checkpoint: PATH, prefix: str, strict: bool}`` pretrained weights.
    """

    def __init__(
        self,
        widen_factor: float = 1.0,
        in_channels: int = 3,
        out_indices: Sequence[int] = (4, 6, 13),
        frozen_stages: int = -1,
        norm: NormSpec = "BN",
        act: ActSpec = "ReLU",
        norm_eval: bool = False,
        init: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if (
            not isinstance(widen_factor, int | float)
            or isinstance(widen_factor, bool)
            or int(STEM_CHANNELS * widen_factor) < 1
        ):
            raise ValueError(
                f"MobileNetV1: widen_factor={widen_factor!r} must be a number with at least one stem channel "
                f"(widen_factor >= {1 / STEM_CHANNELS})"
            )
        norm_type(norm)
        build_activation_layer(act)
        self.out_indices = check_out_indices("MobileNetV1", out_indices, NUM_INDICES)
        self.frozen_stages = check_frozen_stages("MobileNetV1", frozen_stages, NUM_INDICES - 1)
        self.norm_eval = norm_eval

        channels = int(STEM_CHANNELS * widen_factor)
        features: list[nn.Module] = [ConvNormAct(in_channels, channels, 3, stride=2, norm=norm, act=act)]
        stage_channels, stage_strides = [channels], [2]
        total_stride = 2
        for c, s in BLOCKS[: max(self.out_indices)]:
            out = int(c * widen_factor)
            features.append(depthwise_separable(channels, out, s, norm, act))
            channels = out
            total_stride *= s
            stage_channels.append(out)
            stage_strides.append(total_stride)
        self.features = nn.Sequential(*features)
        self.out_channels = [stage_channels[i] for i in self.out_indices]
        self.out_strides = [stage_strides[i] for i in self.out_indices]

        skip = ["fc.", "classifier."] + [f"features.{j}." for j in range(len(features), NUM_INDICES)]
        self.finish_init(init, skip)


    def _frozen_modules(self) -> list[nn.Module]:
        return list(self.features[: self.frozen_stages + 1])


    def forward(self, x: Tensor) -> tuple[Tensor, ...]:
        return forward_features(self.features, x, self.out_indices)
