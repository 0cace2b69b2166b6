"""ResNet (torchvision layout, "b"), ResNetV1c ("c") and ResNet-vd as a multi-scale backbone.

Parameter names are torchvision's (``conv1``, ``bn1``, ``layer1``..``layer4``, blocks with
``conv1/bn1/conv2/bn2[/conv3/bn3]`` and ``downsample.0`` conv / ``downsample.1`` norm), so a torchvision
``resnet*`` state dict loads directly (its ``fc.*`` is skipped).

ResNet-vd ("Bag of Tricks", He et al. 2019) differs in two places and names them as mmdet/mmseg's
ResNetV1d does, so their checkpoints load with ``prefix: backbone``:

* deep stem ``stem``: a flat ``Sequential`` of three 3x3 conv+norm+ReLU (``stem.0`` conv, ``stem.1`` norm,
  ``stem.3``/``stem.4``, ``stem.6``/``stem.7``; widths base/2, base/2, base), replacing ``conv1``/``bn1``;
* shortcut ``downsample.0`` AvgPool2d(stride, ceil_mode, count_include_pad=False) (present in every
  stage, an identity pool at stride 1, so names are uniform), ``downsample.1`` 1x1 conv at stride 1,
  ``downsample.2`` norm.

ResNetV1c (mmseg's ``ResNetV1c``, the backbone of its PSPNet/DeepLab/ICNet "r50-d8" models and of the
``resnet*_v1c`` checkpoints) takes only the first change: the deep ``stem`` with the standard shortcut
(``downsample.0`` 1x1 conv carrying the stride, ``downsample.1`` norm).

``output_stride`` replaces strides by dilation exactly like torchvision's ``replace_stride_with_dilation``:
a stage whose stride would push the total stride past ``output_stride`` gets stride 1 and multiplies the
dilation by its stride; its first block keeps the previous dilation in the 3x3 conv, the later blocks use
the new one. (torchvision refuses dilation in BasicBlock; here both 3x3 convs of a BasicBlock use it.)

The same two changes are also separate switches (``deep_stem`` with its ``stem_channels``, ``avg_down``), so a
model can take the deep stem at other widths (ACE2P's 64-64-128) or the average-pool shortcut alone; ``variant``
'c' / 'vd' switch them on by name. ``dcn_stages`` replaces the 3x3 conv of every block in the chosen stages (the
Bottleneck's ``conv2``, BasicBlock's second 3x3) by a modulated deformable conv (DCNv2, ``ModulatedDeformConv2d``:
same ``conv2.weight``, plus ``conv2.conv_offset``), as PaddleDetection's ``dcn_v2_stages`` and mmdet's
``stage_with_dcn``. Depth 200 is ResNet-200 (He et al. 2016, "Identity Mappings"; Bottleneck ``[3, 24, 36, 3]``).

Stages after the last of ``out_indices`` are not built: they would be dead weights that make DDP fail
on unused parameters; their checkpoint keys are skipped silently.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor, nn

from oars.registry import MODELS

from ..layers import ModulatedDeformConv2d, build_norm_layer
from ..layers.norm import NormSpec, norm_type
from ..utils import (
    check_frozen_stages,
    check_out_indices,
    check_output_stride,
)
from .base import Backbone, forward_features, init_conv_norm
from .resnet_options import check_dcn_stages, check_flag, check_stem_channels, deep_stem_layers


def conv3x3(in_planes: int, out_planes: int, stride: int = 1, dilation: int = 1, dcn: bool = False,
            groups: int = 1) -> nn.Module:
    """A bias-free 3x3 conv keeping the size at stride 1; ``dcn``: a modulated deformable conv (DCNv2) instead."""
    if dcn:
        return ModulatedDeformConv2d(in_planes, out_planes, 3, stride=stride, padding=dilation, dilation=dilation,
                                     groups=groups)
    return nn.Conv2d(in_planes, out_planes, 3, stride=stride, padding=dilation, dilation=dilation, groups=groups,
                     bias=False)


def conv1x1(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_planes, out_planes, 1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """Two 3x3 convs (ResNet-18/34); ``dcn``: the second is deformable (PaddleDetection's BasicBlock ``dcn_v2``)."""

    expansion = 1

    def __init__(
        self,
        inplanes: int,
        planes: int,
        stride: int = 1,
        dilation: int = 1,
        downsample: nn.Module | None = None,
        norm: NormSpec = "BN",
        dcn: bool = False,
    ) -> None:
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride, dilation)
        self.bn1 = build_norm_layer(norm, planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes, 1, dilation, dcn)
        self.bn2 = build_norm_layer(norm, planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: Tensor) -> Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """1x1 -> 3x3 (carries stride and dilation, "ResNet v1.5"; deformable with ``dcn``) -> 1x1 expanding by 4
    (ResNet-50+)."""

    expansion = 4

    def __init__(
        self,
        inplanes: int,
        planes: int,
        stride: int = 1,
        dilation: int = 1,
        downsample: nn.Module | None = None,
        norm: NormSpec = "BN",
        dcn: bool = False,
    ) -> None:
        super().__init__()
        self.conv1 = conv1x1(inplanes, planes)
        self.bn1 = build_norm_layer(norm, planes)
        self.conv2 = conv3x3(planes, planes, stride, dilation, dcn)
        self.bn2 = build_norm_layer(norm, planes)
        self.conv3 = conv1x1(planes, planes * self.expansion)
        self.bn3 = build_norm_layer(norm, planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: Tensor) -> Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


ARCH_SETTINGS: dict[int, tuple[type[BasicBlock] | type[Bottleneck], tuple[int, int, int, int]]] = {
    18: (BasicBlock, (2, 2, 2, 2)),
    34: (BasicBlock, (3, 4, 6, 3)),
    50: (Bottleneck, (3, 4, 6, 3)),
    101: (Bottleneck, (3, 4, 23, 3)),
    152: (Bottleneck, (3, 8, 36, 3)),
    200: (Bottleneck, (3, 24, 36, 3)),
}
VARIANTS = ("b", "c", "vd")
DEEP_STEM_VARIANTS = ("c", "vd")  # three 3x3 convs (``stem``) instead of the 7x7 ``conv1``/``bn1``


@MODELS.register_module()
class ResNet(Backbone):
    """ResNet backbone returning one feature map per ``out_indices`` entry (0 = ``layer1`` ... 3 = ``layer4``).

    Args:
        depth: 18, 34, 50, 101, 152 or 200.
        in_channels: channels of the input image.
        base_channels: stem width; stage ``i`` has ``base_channels * 2**i`` planes (times 4 for Bottleneck).
        out_indices: stages to return, strictly increasing.
        strides: stride of each stage's first block.
        output_stride: None (plain strides, 32 by default), 16 or 8 (later strides become dilation).
        frozen_stages: -1 none, 0 the stem, k the stem and ``layer1..layer{k}`` (no grad, eval mode).
        norm: norm spec for every norm layer (see ``build_norm_layer``).
        norm_eval: keep every batch-norm layer in eval mode while training (small batches).
        variant: ``'b'`` (torchvision), ``'c'`` (ResNetV1c: deep stem, strided 1x1 conv shortcut) or ``'vd'``
            (deep stem + average-pool shortcut); 'c' and 'vd' switch on ``deep_stem`` (and 'vd' ``avg_down``).
        deep_stem: three 3x3 conv+norm+ReLU (the first at stride 2) instead of the 7x7 conv, then the max-pool.
        stem_channels: the deep stem's three widths (None: ``base_channels // 2``, ``base_channels // 2``,
            ``base_channels``, i.e. 32-32-64 as mmdet's ResNetV1d and Paddle's vd; ACE2P: 64-64-128); the last one
            feeds ``layer1``.
        avg_down: the shortcut of every stage average-pools (stride, ceil mode) before its 1x1 conv at stride 1.
        dcn_stages: four flags; True makes that stage's 3x3 convs deformable (DCNv2; Paddle's DCNv2 models:
            ``[false, true, true, true]``, stages C3-C5).
        zero_init_residual: zero the last norm weight in each block (block starts as identity).
        init: ``{checkpoint: PATH, prefix: str, strict: bool}`` pretrained weights (see ``load_pretrained``).
    """

    def __init__(
        self,
        depth: int,
        in_channels: int = 3,
        base_channels: int = 64,
        out_indices: Sequence[int] = (0, 1, 2, 3),
        strides: Sequence[int] = (1, 2, 2, 2),
        output_stride: int | None = None,
        frozen_stages: int = -1,
        norm: NormSpec = "BN",
        norm_eval: bool = False,
        variant: str = "b",
        deep_stem: bool = False,
        stem_channels: Sequence[int] | None = None,
        avg_down: bool = False,
        dcn_stages: Sequence[bool] = (False, False, False, False),
        zero_init_residual: bool = False,
        init: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if depth not in ARCH_SETTINGS:
            raise ValueError(f"ResNet: depth={depth!r} is not supported; accepted: {sorted(ARCH_SETTINGS)}")
        if variant not in VARIANTS:
            raise ValueError(f"ResNet: variant={variant!r} is not supported; accepted: {list(VARIANTS)}")
        if len(strides) != 4 or any(not isinstance(s, int) or s < 1 for s in strides):
            raise ValueError(f"ResNet: strides={list(strides)!r} must be 4 positive ints, e.g. [1, 2, 2, 2]")
        norm_type(norm)  # fail early with the accepted names
        block, layers = ARCH_SETTINGS[depth]
        self.depth = depth
        self.variant = variant
        self.deep_stem = check_flag("deep_stem", deep_stem) or variant in DEEP_STEM_VARIANTS
        self.avg_down = check_flag("avg_down", avg_down) or variant == "vd"
        self.stem_channels = check_stem_channels(stem_channels, self.deep_stem, base_channels)
        self.dcn_stages = check_dcn_stages("ResNet", dcn_stages)
        self.out_indices = check_out_indices("ResNet", out_indices, 4)
        self.output_stride = check_output_stride("ResNet", output_stride)
        self.frozen_stages = check_frozen_stages("ResNet", frozen_stages, 4)
        self.norm_eval = norm_eval

        self._make_stem(in_channels, base_channels, norm)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)

        self.inplanes = self.stem_channels[-1]
        self.dilation = 1
        total_stride = 4
        self.stage_names: list[str] = []
        stage_channels, stage_strides = [], []
        for i in range(max(self.out_indices) + 1):
            stride, previous_dilation = strides[i], self.dilation
            if output_stride is not None and total_stride * stride > output_stride:
                self.dilation *= stride
                stride = 1
            total_stride *= stride
            planes = base_channels * 2**i
            stage = self._make_layer(block, planes, layers[i], stride, previous_dilation, norm, self.dcn_stages[i],
                                     self.avg_down)
            name = f"layer{i + 1}"
            self.add_module(name, stage)
            self.stage_names.append(name)
            stage_channels.append(planes * block.expansion)
            stage_strides.append(total_stride)
        self.out_channels = [stage_channels[i] for i in self.out_indices]
        self.out_strides = [stage_strides[i] for i in self.out_indices]

        self._init_weights(zero_init_residual)
        skip = ["fc."] + [f"layer{i + 1}." for i in range(max(self.out_indices) + 1, 4)]
        self.finish_init(init, skip, leaky_slope=None)

    def _make_stem(self, in_channels: int, base_channels: int, norm: NormSpec) -> None:
        if not self.deep_stem:
            self.conv1 = nn.Conv2d(in_channels, base_channels, 7, stride=2, padding=3, bias=False)
            self.bn1 = build_norm_layer(norm, base_channels)
            self.relu = nn.ReLU(inplace=True)
            return
        self.stem = deep_stem_layers(in_channels, self.stem_channels, norm)

    def _make_layer(
        self,
        block: type[BasicBlock] | type[Bottleneck],
        planes: int,
        num_blocks: int,
        stride: int,
        previous_dilation: int,
        norm: NormSpec,
        dcn: bool = False,
        avg_down: bool | None = None,
    ) -> nn.Sequential:
        """One stage. ``dcn``: deformable 3x3 convs; ``avg_down``: the vd shortcut (None: ``self.variant == 'vd'``,
        for the one-stage builders that call this with their own ``self``, e.g. the C4 ``ResLayer``)."""
        if avg_down is None:
            avg_down = self.variant == "vd"
        downsample = None
        out_planes = planes * block.expansion
        if stride != 1 or self.inplanes != out_planes:
            if avg_down:
                downsample = nn.Sequential(
                    nn.AvgPool2d(stride, stride=stride, ceil_mode=True, count_include_pad=False),
                    conv1x1(self.inplanes, out_planes),
                    build_norm_layer(norm, out_planes),
                )
            else:
                downsample = nn.Sequential(
                    conv1x1(self.inplanes, out_planes, stride), build_norm_layer(norm, out_planes)
                )
        blocks = [block(self.inplanes, planes, stride, previous_dilation, downsample, norm, dcn)]
        self.inplanes = out_planes
        blocks += [block(out_planes, planes, 1, self.dilation, None, norm, dcn) for _ in range(1, num_blocks)]
        return nn.Sequential(*blocks)

    def _init_weights(self, zero_init_residual: bool) -> None:
        """torchvision's initialisation (``init_conv_norm``), optionally zeroing each block's last norm."""
        init_conv_norm(self)
        if zero_init_residual:
            for m in self.modules():
                last = m.bn3 if isinstance(m, Bottleneck) else m.bn2 if isinstance(m, BasicBlock) else None
                if last is not None and getattr(last, "weight", None) is not None:
                    nn.init.constant_(last.weight, 0)

    def _frozen_modules(self) -> list[nn.Module]:
        if self.frozen_stages < 0:
            return []
        stem = [self.stem] if self.deep_stem else [self.conv1, self.bn1]
        stages = [getattr(self, f"layer{i}") for i in range(1, self.frozen_stages + 1) if hasattr(self, f"layer{i}")]
        return stem + stages

    def forward_stem(self, x: Tensor) -> Tensor:
        """Images [B, C, H, W] -> stem + max-pool output [B, stem width, H / 4, W / 4] float (stem width:
        ``base_channels``, or ``stem_channels[-1]`` with the deep stem)."""
        x = self.stem(x) if self.deep_stem else self.relu(self.bn1(self.conv1(x)))
        return self.maxpool(x)

    def forward(self, x: Tensor) -> tuple[Tensor, ...]:
        x = self.forward_stem(x)
        return forward_features([getattr(self, name) for name in self.stage_names], x, self.out_indices)
