"""Activation layers chosen by name in configs (``act: ReLU`` or ``act: {type: LeakyReLU, negative_slope: 0.1}``)."""

from __future__ import annotations

from typing import Any

from torch import nn

ACT_LAYERS: dict[str, type[nn.Module]] = {
    "ReLU": nn.ReLU,
    "ReLU6": nn.ReLU6,
    "LeakyReLU": nn.LeakyReLU,
    "PReLU": nn.PReLU,
    "SiLU": nn.SiLU,
    "GELU": nn.GELU,
    "Hardswish": nn.Hardswish,
    "Hardsigmoid": nn.Hardsigmoid,
    "Sigmoid": nn.Sigmoid,
    "Tanh": nn.Tanh,
    "Mish": nn.Mish,
}
# Activations that accept ``inplace``; we default it to True there (as torchvision does).
_INPLACE = {"ReLU", "ReLU6", "LeakyReLU", "SiLU", "Hardswish", "Hardsigmoid", "Mish"}

ActSpec = str | dict[str, Any]


def build_activation_layer(act: ActSpec) -> nn.Module:
    """An activation module from a type name or a dict with ``type`` and keyword arguments."""
    if isinstance(act, str):
        name, kwargs = act, {}
    elif isinstance(act, dict) and "type" in act:
        kwargs = dict(act)
        name = kwargs.pop("type")
    else:
        raise ValueError(f"act must be a type name or a dict with 'type', got {act!r}; accepted: {sorted(ACT_LAYERS)}")
    if name not in ACT_LAYERS:
        raise ValueError(f"unknown activation type {name!r}; accepted: {sorted(ACT_LAYERS)}")
    if name in _INPLACE:
        kwargs.setdefault("inplace", True)
    try:
        return ACT_LAYERS[name](**kwargs)
    except TypeError as err:
        raise ValueError(f"invalid arguments {kwargs} for activation {name!r}: {err}") from None
