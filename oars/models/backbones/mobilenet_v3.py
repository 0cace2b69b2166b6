"""MobileNetV3 (Howard et al., 2019) large / small as a multi-scale backbone, with torchvision's parameter names.

``features`` is numbered and nested exactly as in ``torchvision.models.mobilenet_v3_large`` / ``_small``
(``features.0`` stem conv + Hardswish, ``features.k`` inverted residuals with a ``block`` Sequential of
expand / depthwise / squeeze-excitation (``fc1``, ``fc2``) / project units, the last ``features`` entry the
1x1 conv to 6x the last width), so a torchvision state dict loads directly (``classifier.*`` is skipped).
Norm defaults to torchvision's ``BN(eps=1e-3, momentum=0.01)``.

Indices (``out_indices``, ``frozen_stages``) are positions in ``features``. At ``widen_factor=1``:

* large (0..16): 0 -> 16 ch / stride 2, 1 -> 16 / 2, 2-3 -> 24 / 4, 4-6 -> 40 / 8, 7-10 -> 80 / 16,
  11-12 -> 112 / 16, 13-15 -> 160 / 32, 16 -> 960 / 32 (final 1x1 conv).
  Default ``(6, 12, 15)``: 40 / 112 / 160 channels at strides 8 / 16 / 32 (PaddleDetection's YOLOv3
  ``feature_maps: [7, 13, 16]``, which counts from 1 at the stem).
* small (0..12): 0 -> 16 / 2, 1 -> 16 / 4, 2-3 -> 24 / 8, 4-6 -> 40 / 16, 7-8 -> 48 / 16,
  9-11 -> 96 / 32, 12 -> 576 / 32 (final 1x1 conv).
  Default ``(3, 8, 11)``: 24 / 48 / 96 channels at strides 8 / 16 / 32 (PaddleDetection's ``[4, 9, 12]``).

Entries after the last requested index are not built (no unused parameters under DDP).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from torch import Tensor, nn
from torchvision.ops import SqueezeExcitation

from oars.registry import MODELS

from ..layers import ConvNormAct
from ..layers.norm import NormSpec, norm_type
from ..utils import check_frozen_stages, check_out_indices
from .base import Backbone, forward_features
from .mobilenet_v2 import make_divisible

TORCHVISION_BN = {"type": "BN", "eps": 1e-3, "momentum": 0.01}


class BlockSetting(NamedTuple):
    """One row of the paper's Tables 1/2: kernel, expanded width, output width, SE, Hardswish, stride."""

    kernel: int
    expanded: int
    out: int
    use_se: bool
    use_hs: bool
    stride: int


def _rows(*rows: tuple[int, int, int, bool, bool, int]) -> tuple[BlockSetting, ...]:
    return tuple(BlockSetting(*r) for r in rows)


ARCH_SETTINGS: dict[str, tuple[BlockSetting, ...]] = {
    "large": _rows(
        (3, 16, 16, False, False, 1),
        (3, 64, 24, False, False, 2),
        (3, 72, 24, False, False, 1),
        (5, 72, 40, True, False, 2),
        (5, 120, 40, True, False, 1),
        (5, 120, 40, True, False, 1),
        (3, 240, 80, False, True, 2),
        (3, 200, 80, False, True, 1),
        (3, 184, 80, False, True, 1),
        (3, 184, 80, False, True, 1),
        (3, 480, 112, True, True, 1),
        (3, 672, 112, True, True, 1),
        (5, 672, 160, True, True, 2),
        (5, 960, 160, True, True, 1),
        (5, 960, 160, True, True, 1),
    ),
    "small": _rows(
        (3, 16, 16, True, False, 2),
        (3, 72, 24, False, False, 2),
        (3, 88, 24, False, False, 1),
        (5, 96, 40, True, True, 2),
        (5, 240, 40, True, True, 1),
        (5, 240, 40, True, True, 1),
        (5, 120, 48, True, True, 1),
        (5, 144, 48, True, True, 1),
        (5, 288, 96, True, True, 2),
        (5, 576, 96, True, True, 1),
        (5, 576, 96, True, True, 1),
    ),
}
DEFAULT_OUT_INDICES = {"large": (6, 12, 15), "small": (3, 8, 11)}
STEM_CHANNELS = 16


class InvertedResidual(nn.Module):
    """Expand 1x1 (skipped when the width does not change) -> depthwise kxk (stride) -> optional SE
    (ReLU, Hardsigmoid gate) -> project 1x1 without activation; a skip when the shape is kept."""

    def __init__(
        self, inp: int, expanded: int, oup: int, kernel: int, stride: int, use_se: bool, use_hs: bool, norm: NormSpec
    ) -> None:
        super().__init__()
        act = "Hardswish" if use_hs else "ReLU"
        self.use_res_connect = stride == 1 and inp == oup
        layers: list[nn.Module] = []
        if expanded != inp:
            layers.append(ConvNormAct(inp, expanded, 1, norm=norm, act=act))
        layers.append(ConvNormAct(expanded, expanded, kernel, stride=stride, groups=expanded, norm=norm, act=act))
        if use_se:
            layers.append(SqueezeExcitation(expanded, make_divisible(expanded // 4), scale_activation=nn.Hardsigmoid))
        layers.append(ConvNormAct(expanded, oup, 1, norm=norm, act=None))
        self.block = nn.Sequential(*layers)
        self.out_channels = oup

    def forward(self, x: Tensor) -> Tensor:
        return x + self.block(x) if self.use_res_connect else self.block(x)


@MODELS.register_module()
class MobileNetV3(Backbone):
    """MobileNetV3 backbone returning one feature map per ``out_indices`` entry (see module docstring).

    Args:
        arch: ``'large'`` or ``'small'``.
        widen_factor: width multiplier (torchvision's ``width_mult``), channels rounded to multiples of 8.
        in_channels: channels of the input image.
        out_indices: positions in ``features``, strictly increasing; None -> the arch's stride 8/16/32 default.
        frozen_stages: -1 none, 0 the stem, k ``features.0..k`` (no grad, eval mode).
        norm: norm spec for every norm layer (default torchvision's BN with eps 1e-3, momentum 0.01).
        norm_eval: keep every batch-norm layer in eval mode while training.
        init: ``{checkpoint: PATH, prefix: str, strict: bool}`` pretrained weights.
    """

    def __init__(
        self,
        arch: str = "large",
        widen_factor: float = 1.0,
        in_channels: int = 3,
        out_indices: Sequence[int] | None = None,
        frozen_stages: int = -1,
        norm: NormSpec = TORCHVISION_BN,
        norm_eval: bool = False,
        init: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if arch not in ARCH_SETTINGS:
            raise ValueError(f"MobileNetV3: arch={arch!r} is not supported; accepted: {sorted(ARCH_SETTINGS)}")
        if not isinstance(widen_factor, int | float) or isinstance(widen_factor, bool) or widen_factor <= 0:
            raise ValueError(f"MobileNetV3: widen_factor={widen_factor!r} must be a positive number")
        norm_type(norm)
        settings = ARCH_SETTINGS[arch]
        num_indices = len(settings) + 2  # stem, blocks, final 1x1 conv
        self.arch = arch
        self.out_indices = check_out_indices(
            "MobileNetV3", DEFAULT_OUT_INDICES[arch] if out_indices is None else out_indices, num_indices
        )
        self.frozen_stages = check_frozen_stages("MobileNetV3", frozen_stages, num_indices - 1)
        self.norm_eval = norm_eval

        def width(c: int) -> int:
            return make_divisible(c * widen_factor)

        channels = width(STEM_CHANNELS)
        features: list[nn.Module] = [ConvNormAct(in_channels, channels, 3, stride=2, norm=norm, act="Hardswish")]
        stage_channels, stage_strides = [channels], [2]
        total_stride = 2
        last = max(self.out_indices)
        for s in settings[:last]:
            out = width(s.out)
            features.append(
                InvertedResidual(channels, width(s.expanded), out, s.kernel, s.stride, s.use_se, s.use_hs, norm)
            )
            channels = out
            total_stride *= s.stride
            stage_channels.append(out)
            stage_strides.append(total_stride)
        if last == num_indices - 1:
            features.append(ConvNormAct(channels, 6 * channels, 1, norm=norm, act="Hardswish"))
            stage_channels.append(6 * channels)
            stage_strides.append(total_stride)
        self.features = nn.Sequential(*features)
        self.out_channels = [stage_channels[i] for i in self.out_indices]
        self.out_strides = [stage_strides[i] for i in self.out_indices]

        skip = ["classifier."] + [f"features.{j}." for j in range(len(features), num_indices)]
        self.finish_init(init, skip)


    def _frozen_modules(self) -> list[nn.Module]:
        return list(self.features[: self.frozen_stages + 1])


    def forward(self, x: Tensor) -> tuple[Tensor, ...]:
        return forward_features(self.features, x, self.out_indices)
