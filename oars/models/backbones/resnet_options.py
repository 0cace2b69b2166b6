"""The ResNet-family options shared by ResNet and SENet: the deep stem and the argument checks of ``deep_stem``,
``stem_channels``, ``avg_down`` and ``dcn_stages`` (one message each, naming the argument and what it accepts)."""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from ..layers import build_norm_layer
from ..layers.norm import NormSpec


def check_flag(name: str, value: object) -> bool:
    """A boolean switch (``deep_stem``, ``avg_down``); YAML's ``yes``/``true`` arrive as bool, a string does not."""
    if not isinstance(value, bool):
        raise ValueError(f"ResNet: {name}={value!r} must be true or false")
    return value


def check_stem_channels(stem_channels: Sequence[int] | None, deep_stem: bool, base_channels: int) -> tuple[int, ...]:
    """The stem's widths: the deep stem's three (default ``base/2, base/2, base``), or ``(base_channels,)`` for the
    7x7 stem. ``stem_channels`` without the deep stem is refused (it would be silently unused)."""
    if stem_channels is None:
        return (base_channels // 2, base_channels // 2, base_channels) if deep_stem else (base_channels,)
    if not deep_stem:
        raise ValueError(f"ResNet: stem_channels={list(stem_channels)!r} sets the deep stem's widths, but the deep "
                         "stem is off; set deep_stem: true (or variant: c / vd), or remove stem_channels")
    channels = tuple(stem_channels) if isinstance(stem_channels, (list, tuple)) else ()
    if len(channels) != 3 or any(not isinstance(c, int) or isinstance(c, bool) or c < 1 for c in channels):
        raise ValueError(f"ResNet: stem_channels={stem_channels!r} must be 3 positive ints (the deep stem's three "
                         "3x3 convs), e.g. [32, 32, 64]")
    return channels


def check_dcn_stages(owner: str, dcn_stages: Sequence[bool]) -> tuple[bool, ...]:
    """Four booleans, one per stage (``layer1``..``layer4``): which stages get deformable 3x3 convs."""
    flags = tuple(dcn_stages) if isinstance(dcn_stages, (list, tuple)) else ()
    if len(flags) != 4 or any(not isinstance(f, bool) for f in flags):
        raise ValueError(f"{owner}: dcn_stages={dcn_stages!r} must be 4 booleans, one per stage (layer1..layer4), "
                         "e.g. [false, true, true, true] for DCNv2 in C3-C5")
    return flags


def deep_stem_layers(in_channels: int, widths: Sequence[int], norm: NormSpec) -> nn.Sequential:
    """Three 3x3 conv + norm + ReLU, the first at stride 2 ("Bag of Tricks" ResNet-C), as one flat ``Sequential``
    (``0`` conv, ``1`` norm, ``3``/``4``, ``6``/``7``: mmdet's ``stem`` names)."""
    layers: list[nn.Module] = []
    for i, width in enumerate(widths):
        layers += [nn.Conv2d(in_channels, width, 3, stride=2 if i == 0 else 1, padding=1, bias=False),
                   build_norm_layer(norm, width), nn.ReLU(inplace=True)]
        in_channels = width
    return nn.Sequential(*layers)
