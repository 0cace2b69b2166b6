"""Conv + norm + activation, the unit most heads and necks are made of.

It is an ``nn.Sequential`` whose children are numbered exactly like torchvision's
``Conv2dNormActivation`` (``0`` conv, ``1`` norm, then the activation; with no norm the activation is
``1``), so parameter names of torchvision models built from that block (MobileNet, DeepLabV3's ASPP
and head) are reproduced and their state dicts load directly.
"""

from __future__ import annotations

from torch import nn

from .activation import ActSpec, build_activation_layer
from .norm import NormSpec, build_norm_layer


class ConvNormAct(nn.Sequential):
    """``Conv2d`` (bias only without a norm) -> optional norm -> optional activation.

    ``padding=None`` keeps the spatial size at stride 1: ``dilation * (kernel_size - 1) // 2``.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        padding: int | None = None,
        dilation: int = 1,
        groups: int = 1,
        norm: NormSpec | None = "BN",
        act: ActSpec | None = "ReLU",
    ) -> None:
        if padding is None:
            padding = dilation * (kernel_size - 1) // 2
        layers: list[nn.Module] = [
            nn.Conv2d(
                in_channels,
                out_channels,
                kernel_size,
                stride=stride,
                padding=padding,
                dilation=dilation,
                groups=groups,
                bias=norm is None,
            )
        ]
        if norm is not None:
            layers.append(build_norm_layer(norm, out_channels))
        if act is not None:
            layers.append(build_activation_layer(act))
        super().__init__(*layers)
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.with_norm = norm is not None
        self.with_act = act is not None

    @property
    def conv(self) -> nn.Conv2d:
        return self[0]

    @property
    def norm(self) -> nn.Module | None:
        return self[1] if self.with_norm else None

    @property
    def act(self) -> nn.Module | None:
        return self[-1] if self.with_act else None
