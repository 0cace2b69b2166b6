"""DarkNet-53, the YOLOv3 backbone (Redmon & Farhadi, 2018), as a multi-scale backbone.

A 3x3 stem conv (``base_channels``, stride 1), then five stages, each a 3x3 stride-2 conv that doubles
the width followed by residual blocks (1x1 to half width, 3x3 back, added to the input; no activation
after the sum, as in the original ``shortcut`` layers). Blocks per stage: 1, 2, 8, 8, 4.

Indices (``out_indices``, ``frozen_stages``): 0 = stem (32 ch, stride 1), 1..5 = stages with
64 / 128 / 256 / 512 / 1024 channels at strides 2 / 4 / 8 / 16 / 32 (at ``base_channels=32``). The
default ``(3, 4, 5)`` gives YOLOv3's three levels: 256 / 512 / 1024 channels at strides 8 / 16 / 32.

Module names follow mmdet's ``DarkNet`` (``conv1``, ``conv_res_block{i}`` holding ``conv`` and
``res{j}`` with ``conv1``/``conv2``); each conv unit is a ``ConvNormAct`` (children ``0`` conv,
``1`` norm), so an mmdet checkpoint needs its ``.conv.``/``.bn.`` leaf names mapped to ``.0.``/``.1.``.
Stages after the last of ``out_indices`` are not built (no unused parameters under DDP).
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

# depth -> residual blocks per stage
ARCH_SETTINGS: dict[int, tuple[int, ...]] = {53: (1, 2, 8, 8, 4)}
NUM_STAGES = 5
LEAKY_RELU = {"type": "LeakyReLU", "negative_slope": 0.1}


class ResBlock(nn.Module):
    """``x + conv2(conv1(x))``: 1x1 conv to ``channels // 2``, then 3x3 conv back to ``channels``."""

    def __init__(self, channels: int, norm: NormSpec = "BN", act: ActSpec = LEAKY_RELU) -> None:
        super().__init__()
        half = channels // 2
        self.conv1 = ConvNormAct(channels, half, 1, norm=norm, act=act)
        self.conv2 = ConvNormAct(half, channels, 3, norm=norm, act=act)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.conv2(self.conv1(x))


def make_stage(in_channels: int, out_channels: int, num_blocks: int, norm: NormSpec, act: ActSpec) -> nn.Sequential:
    """A stride-2 3x3 downsampling conv (``conv``) followed by ``num_blocks`` residual blocks (``res{j}``)."""
    stage = nn.Sequential()
    stage.add_module("conv", ConvNormAct(in_channels, out_channels, 3, stride=2, norm=norm, act=act))
    for j in range(num_blocks):
        stage.add_module(f"res{j}", ResBlock(out_channels, norm, act))
    return stage


@MODELS.register_module()
class DarkNet(Backbone):
    """DarkNet backbone returning one feature map per ``out_indices`` entry (see module docstring).

    Args:
        depth: 53 (the only DarkNet used as a detection backbone here).
        in_channels: channels of the input image.
        base_channels: stem width; stage ``i`` (1..5) has ``base_channels * 2**i`` channels. Narrow it
            (e.g. 8 -> stages 16..256) for tests and tiny models.
        out_indices: 0 = stem, 1..5 = stages; strictly increasing.
        frozen_stages: -1 none, 0 the stem, k the stem and stages 1..k (no grad, eval mode).
        norm: norm spec for every norm layer. act: activation spec (default ``LeakyReLU(0.1)``).
        norm_eval: keep every batch-norm layer in eval mode while training (small batches).
        init: ``{checkpoint: PATH, prefix: str, strict: bool}`` pretrained weights (see ``load_pretrained``).
    """

    def __init__(
        self,
        depth: int = 53,
        in_channels: int = 3,
        base_channels: int = 32,
        out_indices: Sequence[int] = (3, 4, 5),
        frozen_stages: int = -1,
        norm: NormSpec = "BN",
        act: ActSpec = LEAKY_RELU,
        norm_eval: bool = False,
        init: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if depth not in ARCH_SETTINGS:
            raise ValueError(f"DarkNet: depth={depth!r} is not supported; accepted: {sorted(ARCH_SETTINGS)}")
        if not isinstance(base_channels, int) or base_channels < 2 or base_channels % 2:
            raise ValueError(f"DarkNet: base_channels={base_channels!r} must be a positive even int (default 32)")
        norm_type(norm)  # fail early with the accepted names
        build_activation_layer(act)
        self.depth = depth
        self.out_indices = check_out_indices("DarkNet", out_indices, NUM_STAGES + 1)
        self.frozen_stages = check_frozen_stages("DarkNet", frozen_stages, NUM_STAGES)
        self.norm_eval = norm_eval

        self.conv1 = ConvNormAct(in_channels, base_channels, 3, norm=norm, act=act)
        self.stage_names = ["conv1"]
        stage_channels, stage_strides = [base_channels], [1]
        channels = base_channels
        for i, num_blocks in enumerate(ARCH_SETTINGS[depth][: max(self.out_indices)], start=1):
            name = f"conv_res_block{i}"
            self.add_module(name, make_stage(channels, channels * 2, num_blocks, norm, act))
            self.stage_names.append(name)
            channels *= 2
            stage_channels.append(channels)
            stage_strides.append(2**i)
        self.out_channels = [stage_channels[i] for i in self.out_indices]
        self.out_strides = [stage_strides[i] for i in self.out_indices]

        skip = ["fc."] + [f"conv_res_block{i}." for i in range(len(self.stage_names), NUM_STAGES + 1)]
        self.finish_init(init, skip, leaky_slope=0.1)


    def _frozen_modules(self) -> list[nn.Module]:
        return [getattr(self, name) for name in self.stage_names[: self.frozen_stages + 1]]


    def forward(self, x: Tensor) -> tuple[Tensor, ...]:
        return forward_features([getattr(self, name) for name in self.stage_names], x, self.out_indices)
