"""Faster R-CNN C4's shared head: ResNet's last stage (res5) run on every RoI's 14x14 res4 feature.

The stage is built by the oars ResNet's own ``_make_layer`` with its ``Bottleneck``/``BasicBlock``, under the
name ``layer{stage + 1}``, so the ``layer4.*`` keys of a ResNet state dict (torchvision or oars) are this
module's keys: ``init: {checkpoint: resnet50.pth}`` loads them (the other stages and ``fc`` are skipped).
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from detection.registry import MODELS
from oars.models.backbones.base import Backbone, init_conv_norm
from oars.models.backbones.resnet import ARCH_SETTINGS, VARIANTS, ResNet
from oars.models.layers.norm import NormSpec, norm_type


@MODELS.register_module()
class ResLayer(Backbone):
    """One ResNet stage as an RoI head (MMDetection's ``ResLayer`` shared head, torchvision "b" blocks:
    the stride sits in the 3x3 conv).

    Args:
        depth: ResNet depth (18, 34, 50, 101, 152).
        stage: 0-based stage index (3 = res5 / ``layer4``).
        stride: stride of the stage's first block (2: a 14x14 RoI feature becomes 7x7).
        dilation: dilation of the stage's 3x3 convs.
        in_channels: channels of the RoI features (given by the RoI head); must be what the stage takes
            (1024 for ResNet-50's res5).
        base_channels: the ResNet's stem width (64).
        norm: norm spec (``FrozenBN`` by default: MMDetection's ``BN`` with ``requires_grad=False`` +
            ``norm_eval``).
        norm_eval: keep batch norms in eval mode while training.
        variant: ``'b'`` or ``'vd'`` (average-pool shortcut), as the backbone.
        init: ``{checkpoint: PATH, prefix: str, strict: bool}`` a ResNet checkpoint whose stage weights to load
            when training starts.

    Attributes:
        out_channels: channels of the output (2048 for ResNet-50's res5).
    """

    def __init__(
        self,
        depth: int = 50,
        stage: int = 3,
        stride: int = 2,
        dilation: int = 1,
        in_channels: int | None = None,
        base_channels: int = 64,
        norm: NormSpec = "FrozenBN",
        norm_eval: bool = True,
        variant: str = "b",
        init: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if depth not in ARCH_SETTINGS:
            raise ValueError(f"ResLayer: depth={depth!r} is not supported; accepted: {sorted(ARCH_SETTINGS)}")
        if not isinstance(stage, int) or not 0 <= stage <= 3:
            raise ValueError(f"ResLayer: stage must be 0..3 (3 = res5), got {stage!r}")
        if variant not in VARIANTS:
            raise ValueError(f"ResLayer: variant={variant!r} is not supported; accepted: {list(VARIANTS)}")
        norm_type(norm)
        block, layers = ARCH_SETTINGS[depth]
        planes = base_channels * 2**stage
        # What ResNet's previous stage hands over (ResNet._make_layer reads self.inplanes / variant / dilation).
        self.inplanes = base_channels if stage == 0 else planes * block.expansion // 2
        if in_channels is not None and in_channels != self.inplanes:
            raise ValueError(
                f"ResLayer: in_channels={in_channels} but ResNet-{depth} stage {stage} takes {self.inplanes} channels "
                "(the RoI features must come from the previous stage)"
            )
        self.in_channels = self.inplanes
        self.variant = variant
        self.dilation = dilation
        self.norm_eval = norm_eval
        self.stage = stage
        self.stride = stride
        self.layer_name = f"layer{stage + 1}"
        layer = ResNet._make_layer(self, block, planes, layers[stage], stride, dilation, norm)  # type: ignore[arg-type]
        self.add_module(self.layer_name, layer)
        self.out_channels = planes * block.expansion
        init_conv_norm(self)
        skip = ["conv1.", "bn1.", "stem.", "fc."] + [f"layer{i + 1}." for i in range(4) if i != stage]
        self.finish_init(init, skip, leaky_slope=None)

    def _frozen_modules(self) -> list[nn.Module]:
        return []

    def forward(self, x: Tensor) -> Tensor:
        """RoI features ``[R, in_channels, s, s]`` -> ``[R, out_channels, s / stride, s / stride]``."""
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f"ResLayer: expects RoI features [R, {self.in_channels}, s, s], got {tuple(x.shape)}")
        return getattr(self, self.layer_name)(x)
