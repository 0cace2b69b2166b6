"""SENet-154 (Hu et al. 2018, "Squeeze-and-Excitation Networks") as a multi-scale backbone, optionally with DCNv2.

The layout is the paper's SENet-154 as Cadene's ``pretrainedmodels`` ``senet154`` builds it, which is also
PaddleDetection's ``SENet`` with ``std_senet: true`` (its "SENet-154-vd": ``depth: 152, groups: 64,
group_width: 4, variant: d``, the backbone of the Objects365 2019 champion CACascade R-CNN):

* ``layer0``: the deep stem, three 3x3 conv+BN+ReLU (64, 64, 128; the first at stride 2), then a 3x3 max-pool at
  stride 2 (padding 1 as Paddle's; Cadene's unpadded ceil-mode pool gives the same size on even inputs);
* four stages of ``[3, 8, 36, 3]`` (depth 152) SE-ResNeXt bottlenecks of width ``w = groups * group_width * 2**i``
  (256, 512, 1024, 2048): 1x1 conv to ``w / 2``, 3x3 grouped conv (``groups``) to ``w`` carrying the stride,
  1x1 conv to ``w``, each with BN; a squeeze-excitation gate (global average, 1x1 conv to ``w / reduction`` +
  ReLU, 1x1 conv back + sigmoid, both with bias) scales the branch before the residual sum;
* the first block of each stage has a projection shortcut: a 1x1 conv (stage 1, stride 1) or a 3x3 conv at stride
  2 (stages 2-4), each with BN (Paddle's ``std_senet`` shortcut; SENet-154 has no average-pool shortcut).

Parameter names are Cadene's (``layer0.conv1`` .. ``layer0.bn3``, ``layerK.J.conv1/bn1/conv2/bn2/conv3/bn3``,
``se_module.fc1/fc2``, ``downsample.0/1``), so a ``senet154-c7b49a05.pth`` state dict loads with ``init``
(its ``last_linear.*`` is skipped). ``dcn_stages`` makes the grouped 3x3 convs of the chosen stages modulated
deformable convs (DCNv2, same ``conv2.weight`` plus ``conv2.conv_offset``), as Paddle's ``dcn_v2_stages: [3, 4, 5]``
= ``[false, true, true, true]``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from oars.registry import MODELS

from ..layers import build_norm_layer
from ..layers.norm import NormSpec, norm_type
from ..utils import check_frozen_stages, check_out_indices
from .base import Backbone, forward_features
from .resnet import conv1x1, conv3x3
from .resnet_options import check_dcn_stages

SENET_DEPTHS: dict[int, tuple[int, int, int, int]] = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}


class SEModule(nn.Module):
    """Squeeze-and-excitation: ``x * sigmoid(fc2(relu(fc1(mean_hw(x)))))``, fc1/fc2 1x1 convs with bias."""

    def __init__(self, channels: int, reduction: int) -> None:
        super().__init__()
        self.fc1 = nn.Conv2d(channels, max(channels // reduction, 1), 1)
        self.relu = nn.ReLU(inplace=True)
        self.fc2 = nn.Conv2d(max(channels // reduction, 1), channels, 1)

    def forward(self, x: Tensor) -> Tensor:
        gate = self.fc2(self.relu(self.fc1(x.mean(dim=(2, 3), keepdim=True))))
        return x * torch.sigmoid(gate)


class SEBottleneck(nn.Module):
    """SENet-154's block: 1x1 (width / 2) -> grouped 3x3 (width, stride; DCNv2 with ``dcn``) -> 1x1 (width) -> SE,
    plus the shortcut; every conv bias-free with a norm."""

    def __init__(self, inplanes: int, width: int, groups: int, reduction: int, stride: int = 1,
                 downsample: nn.Module | None = None, norm: NormSpec = "BN", dcn: bool = False) -> None:
        super().__init__()
        self.conv1 = conv1x1(inplanes, width // 2)
        self.bn1 = build_norm_layer(norm, width // 2)
        self.conv2 = conv3x3(width // 2, width, stride, dcn=dcn, groups=groups)
        self.bn2 = build_norm_layer(norm, width)
        self.conv3 = conv1x1(width, width)
        self.bn3 = build_norm_layer(norm, width)
        self.relu = nn.ReLU(inplace=True)
        self.se_module = SEModule(width, reduction)
        self.downsample = downsample

    def forward(self, x: Tensor) -> Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.se_module(self.bn3(self.conv3(out)))
        return self.relu(out + identity)


@MODELS.register_module()
class SENet(Backbone):
    """SENet-154-style backbone returning one map per ``out_indices`` entry (0 = ``layer1`` ... 3 = ``layer4``,
    strides 4, 8, 16, 32; channels ``groups * group_width * [1, 2, 4, 8]``: 256 ... 2048 for SENet-154).

    Args:
        depth: 50, 101 or 152 (blocks per stage ``[3, 4, 6, 3]``, ``[3, 4, 23, 3]``, ``[3, 8, 36, 3]``).
        groups: cardinality of the grouped 3x3 convs (SENet-154: 64).
        group_width: channels per group in stage 1 (SENet-154: 4); widths double per stage.
        reduction: squeeze-excitation reduction ratio (16).
        stem_channels: widths of the three 3x3 stem convs (64, 64, 128).
        in_channels: channels of the input image.
        out_indices: stages to return, strictly increasing.
        frozen_stages: -1 none, 0 ``layer0`` (the stem), k the stem and ``layer1..layer{k}`` (Paddle's ``freeze_at:
            2`` = 1 here).
        norm: norm spec of every norm layer (see ``build_norm_layer``; detection fine-tuning: ``FrozenBN``).
        norm_eval: keep every batch norm in eval mode while training.
        dcn_stages: four flags; True makes that stage's grouped 3x3 convs DCNv2 (the champion: C3-C5).
        init: ``{checkpoint: PATH, prefix: str, strict: bool}`` pretrained weights (see ``load_pretrained``).
    """

    def __init__(
        self,
        depth: int = 152,
        groups: int = 64,
        group_width: int = 4,
        reduction: int = 16,
        stem_channels: Sequence[int] = (64, 64, 128),
        in_channels: int = 3,
        out_indices: Sequence[int] = (0, 1, 2, 3),
        frozen_stages: int = -1,
        norm: NormSpec = "BN",
        norm_eval: bool = False,
        dcn_stages: Sequence[bool] = (False, False, False, False),
        init: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if depth not in SENET_DEPTHS:
            raise ValueError(f"SENet: depth={depth!r} is not supported; accepted: {sorted(SENET_DEPTHS)}")
        for name, value in (("groups", groups), ("group_width", group_width), ("reduction", reduction)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"SENet: {name}={value!r} must be a positive int")
        if group_width % 2:
            raise ValueError(f"SENet: group_width={group_width} must be even (the first 1x1 conv halves the width, "
                             "which must still split into groups)")
        if len(stem_channels) != 3 or any(not isinstance(c, int) or c < 1 for c in stem_channels):
            raise ValueError(f"SENet: stem_channels={stem_channels!r} must be 3 positive ints, e.g. [64, 64, 128]")
        norm_type(norm)
        self.depth = depth
        self.out_indices = check_out_indices("SENet", out_indices, 4)
        self.frozen_stages = check_frozen_stages("SENet", frozen_stages, 4)
        self.norm_eval = norm_eval
        self.dcn_stages = check_dcn_stages("SENet", dcn_stages)

        self.layer0 = self._make_stem(in_channels, tuple(stem_channels), norm)
        inplanes = stem_channels[-1]
        self.stage_names: list[str] = []
        channels = []
        for i in range(max(self.out_indices) + 1):
            width = groups * group_width * 2**i
            stride = 1 if i == 0 else 2
            shortcut = (conv1x1(inplanes, width) if i == 0
                        else nn.Conv2d(inplanes, width, 3, stride=stride, padding=1, bias=False))
            downsample = nn.Sequential(shortcut, build_norm_layer(norm, width))
            blocks = [SEBottleneck(inplanes, width, groups, reduction, stride, downsample, norm, self.dcn_stages[i])]
            blocks += [SEBottleneck(width, width, groups, reduction, 1, None, norm, self.dcn_stages[i])
                       for _ in range(1, SENET_DEPTHS[depth][i])]
            self.add_module(f"layer{i + 1}", nn.Sequential(*blocks))
            self.stage_names.append(f"layer{i + 1}")
            channels.append(width)
            inplanes = width
        self.out_channels = [channels[i] for i in self.out_indices]
        self.out_strides = [4 * 2**i for i in self.out_indices]
        skip = ["last_linear."] + [f"layer{i + 1}." for i in range(max(self.out_indices) + 1, 4)]
        self.finish_init(init, skip)

    @staticmethod
    def _make_stem(in_channels: int, widths: tuple[int, ...], norm: NormSpec) -> nn.Sequential:
        """``layer0``: conv1/bn1/relu1 .. conv3/bn3/relu3 (the first conv at stride 2), then ``pool``."""
        layers: OrderedDict[str, nn.Module] = OrderedDict()
        for i, width in enumerate(widths, start=1):
            layers[f"conv{i}"] = nn.Conv2d(in_channels, width, 3, stride=2 if i == 1 else 1, padding=1, bias=False)
            layers[f"bn{i}"] = build_norm_layer(norm, width)
            layers[f"relu{i}"] = nn.ReLU(inplace=True)
            in_channels = width
        layers["pool"] = nn.MaxPool2d(3, stride=2, padding=1)
        return nn.Sequential(layers)

    def _frozen_modules(self) -> list[nn.Module]:
        if self.frozen_stages < 0:
            return []
        return [self.layer0] + [getattr(self, name) for name in self.stage_names[: self.frozen_stages]]

    def forward(self, x: Tensor) -> tuple[Tensor, ...]:
        """Images [B, C, H, W] -> the ``out_indices`` stage maps, shallowest first."""
        x = self.layer0(x)
        return forward_features([getattr(self, name) for name in self.stage_names], x, self.out_indices)
