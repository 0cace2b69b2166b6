"""MobileNetV2 as a multi-scale backbone, with torchvision's parameter names.

``features.0`` is the stem conv, ``features.1..17`` the inverted residual blocks and ``features.18`` the
final 1x1 conv to 1280 channels, numbered exactly as in ``torchvision.models.mobilenet_v2`` so its
state dict loads directly (``classifier.*`` is skipped).

Indices (``out_indices``, ``frozen_stages``) count the seven inverted-residual groups of the paper's
table (t, c, n, s), as mmseg does: 0 -> 16 ch / stride 2, 1 -> 24 / 4, 2 -> 32 / 8, 3 -> 64 / 16,
4 -> 96 / 16, 5 -> 160 / 32, 6 -> 320 / 32; index 7 is the final 1x1 conv (1280 ch, ``features.18``).
Groups after the last requested index are not built (no unused parameters under DDP).

``output_stride`` 16 or 8 turns the stride of later groups into dilation the way torchvision's
segmentation MobileNetV3 does: a group whose stride would exceed ``output_stride`` runs at stride 1 and
multiplies the dilation by its stride, and every block of it (first one included) uses the new dilation
in its depthwise 3x3 conv.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor, nn

from oars.registry import MODELS

from ..layers import ConvNormAct, build_norm_layer
from ..layers.norm import NormSpec, norm_type
from ..utils import (
    check_frozen_stages,
    check_out_indices,
    check_output_stride,
)
from .base import Backbone, forward_features

# expand ratio t, channels c, blocks n, first stride s
SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))
NUM_INDICES = len(SETTINGS) + 1  # the seven groups plus the final 1x1 conv


def make_divisible(value: float, divisor: int = 8) -> int:
    """Round channels to a multiple of ``divisor`` without dropping more than 10% (torchvision's rule)."""
    new = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return new + divisor if new < 0.9 * value else new


class InvertedResidual(nn.Module):
    """Expand 1x1 -> depthwise 3x3 (stride, dilation) -> project 1x1, with a skip when shapes allow.

    ``residual`` defaults to torchvision's rule; a block whose stride was turned into dilation keeps
    the decision its original stride made (as torchvision's MobileNetV3 does).
    """

    def __init__(
        self,
        inp: int,
        oup: int,
        stride: int,
        expand_ratio: int,
        dilation: int = 1,
        norm: NormSpec = "BN",
        residual: bool | None = None,
    ) -> None:
        super().__init__()
        hidden = int(round(inp * expand_ratio))
        self.use_res_connect = (stride == 1 and inp == oup) if residual is None else residual
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(ConvNormAct(inp, hidden, 1, norm=norm, act="ReLU6"))
        layers += [
            ConvNormAct(hidden, hidden, 3, stride=stride, dilation=dilation, groups=hidden, norm=norm, act="ReLU6"),
            nn.Conv2d(hidden, oup, 1, bias=False),
            build_norm_layer(norm, oup),
        ]
        self.conv = nn.Sequential(*layers)
        self.out_channels = oup

    def forward(self, x: Tensor) -> Tensor:
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


@MODELS.register_module()
class MobileNetV2(Backbone):
    """MobileNetV2 backbone returning one feature map per ``out_indices`` entry (see module docstring).

    Args:
        widen_factor: width multiplier (torchvision's ``width_mult``), channels rounded to multiples of 8.
        in_channels: channels of the input image.
        out_indices: group indices 0..6 (7 = final 1x1 conv), strictly increasing.
        output_stride: None (32), 16 or 8.
        frozen_stages: -1 none, 0 the stem, k the stem and groups 0..k-1 (no grad, eval mode).
        norm: norm spec for every norm layer. norm_eval: keep BN layers in eval mode while training.
        init: ``{checkpoint: PATH, prefix: str, strict: bool}`` pretrained weights.
    """

    def __init__(
        self,
        widen_factor: float = 1.0,
        in_channels: int = 3,
        out_indices: Sequence[int] = (1, 2, 4, 6),
        output_stride: int | None = None,
        frozen_stages: int = -1,
        norm: NormSpec = "BN",
        norm_eval: bool = False,
        init: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(widen_factor, int | float) or widen_factor <= 0:
            raise ValueError(f"MobileNetV2: widen_factor={widen_factor!r} must be a positive number")
        norm_type(norm)
        self.out_indices = check_out_indices("MobileNetV2", out_indices, NUM_INDICES)
        self.output_stride = check_output_stride("MobileNetV2", output_stride)
        self.frozen_stages = check_frozen_stages("MobileNetV2", frozen_stages, NUM_INDICES)
        self.norm_eval = norm_eval

        channels = make_divisible(32 * widen_factor)
        features: list[nn.Module] = [ConvNormAct(in_channels, channels, 3, stride=2, norm=norm, act="ReLU6")]
        # stage_ends[k]: index in ``features`` of the last module of group k (7: the final conv)
        self.stage_ends: list[int] = []
        stage_channels, stage_strides = [], []
        total_stride, dilation = 2, 1
        last = max(self.out_indices)
        for t, c, n, s in SETTINGS[: last + 1]:
            out = make_divisible(c * widen_factor)
            stride = s
            if output_stride is not None and total_stride * s > output_stride:
                dilation *= s
                stride = 1
            total_stride *= stride
            for i in range(n):
                first = i == 0
                features.append(
                    InvertedResidual(
                        channels,
                        out,
                        stride if first else 1,
                        t,
                        dilation,
                        norm,
                        residual=(s if first else 1) == 1 and channels == out,
                    )
                )
                channels = out
            self.stage_ends.append(len(features) - 1)
            stage_channels.append(out)
            stage_strides.append(total_stride)
        if last == NUM_INDICES - 1:
            last_channel = make_divisible(1280 * max(1.0, widen_factor))
            features.append(ConvNormAct(channels, last_channel, 1, norm=norm, act="ReLU6"))
            self.stage_ends.append(len(features) - 1)
            stage_channels.append(last_channel)
            stage_strides.append(total_stride)
        self.features = nn.Sequential(*features)
        self.out_channels = [stage_channels[i] for i in self.out_indices]
        self.out_strides = [stage_strides[i] for i in self.out_indices]
        self._out_positions = {self.stage_ends[i] for i in self.out_indices}

        skip = ["classifier."] + [f"features.{j}." for j in range(len(features), 19)]
        self.finish_init(init, skip)


    def _frozen_modules(self) -> list[nn.Module]:
        if self.frozen_stages < 0:
            return []
        end = 0 if self.frozen_stages == 0 else self.stage_ends[min(self.frozen_stages, len(self.stage_ends)) - 1]
        return list(self.features[: end + 1])


    def forward(self, x: Tensor) -> tuple[Tensor, ...]:
        return forward_features(self.features, x, self._out_positions)
