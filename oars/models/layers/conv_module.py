"""Conv + norm + activation, the unit most heads and necks are made of.

A thin subclass of torchvision's ``Conv2dNormActivation`` (children ``0`` conv, ``1`` norm, then the
activation; with no norm the activation is ``1``), so parameter names of torchvision models built from
that block (MobileNet, DeepLabV3's ASPP and head) are reproduced and their state dicts load directly.
It only adds config-style ``norm``/``act`` specs and ``.conv/.norm/.act`` accessors.
"""

from __future__ import annotations

from functools import partial

from torch import nn
from torchvision.ops import Conv2dNormActivation

from .activation import ActSpec, build_activation_layer
from .norm import NormSpec, build_norm_layer


class ConvNormAct(Conv2dNormActivation):
    """``Conv2d`` (bias only without a norm) -> optional norm -> optional activation.

    ``padding=None`` keeps the spatial size at stride 1: ``dilation * (kernel_size - 1) // 2`` (computed
    here because torchvision's ``(kernel_size - 1) // 2 * dilation`` differs for even kernels).
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
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride=stride,
            padding=padding,
            groups=groups,
            # torchvision calls norm_layer(out_channels) and, with inplace=None, activation_layer();
            # our builders then apply the spec (and default inplace=True where supported).
            norm_layer=None if norm is None else partial(build_norm_layer, norm),
            activation_layer=None if act is None else partial(build_activation_layer, act),
            dilation=dilation,
            inplace=None,
            bias=norm is None,
        )
        self.in_channels = in_channels
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
