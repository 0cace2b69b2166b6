"""Normalisation layers chosen by name in configs (``norm: BN`` or ``norm: {type: GN, num_groups: 32}``).

One builder for every model, so a config can swap BN for SyncBN (multi-GPU), FrozenBN (detection
fine-tuning with small batches) or GN without touching code.
"""

from __future__ import annotations

from typing import Any

from torch import nn
from torchvision.ops.misc import FrozenBatchNorm2d

NORM_LAYERS: dict[str, type[nn.Module]] = {
    "BN": nn.BatchNorm2d,
    "SyncBN": nn.SyncBatchNorm,
    "FrozenBN": FrozenBatchNorm2d,
    "GN": nn.GroupNorm,
    "IN": nn.InstanceNorm2d,
}

NormSpec = str | dict[str, Any]


def _split(norm: NormSpec) -> tuple[str, dict[str, Any]]:
    if isinstance(norm, str):
        return norm, {}
    if isinstance(norm, dict):
        if "type" not in norm:
            raise ValueError(f"norm config {norm!r} has no 'type' key; accepted types: {sorted(NORM_LAYERS)}")
        kwargs = dict(norm)
        return kwargs.pop("type"), kwargs
    raise ValueError(
        f"norm must be a string or a dict with 'type', got {type(norm).__name__} {norm!r}; "
        f"accepted types: {sorted(NORM_LAYERS)}"
    )


def norm_type(norm: NormSpec) -> str:
    """The type name of a norm spec (validated)."""
    name, _ = _split(norm)
    if name not in NORM_LAYERS:
        raise ValueError(f"unknown norm type {name!r}; accepted: {sorted(NORM_LAYERS)}")
    return name


def build_norm_layer(norm: NormSpec, num_features: int) -> nn.Module:
    """A 2-d normalisation layer over ``num_features`` channels.

    ``norm`` is a type name (``'BN'``, ``'SyncBN'``, ``'FrozenBN'``, ``'GN'``, ``'IN'``) or a dict with
    ``type`` and the layer's keyword arguments (``{type: BN, momentum: 0.01, eps: 1e-3}``,
    ``{type: GN, num_groups: 16}``). GN defaults to 32 groups.
    """
    name = norm_type(norm)
    _, kwargs = _split(norm)
    if name == "GN":
        num_groups = kwargs.pop("num_groups", 32)
        if num_features % num_groups != 0:
            raise ValueError(
                f"GN with num_groups={num_groups} cannot normalise {num_features} channels "
                "(channels must be divisible by num_groups); set norm={type: GN, num_groups: ...}"
            )
        args: tuple[int, ...] = (num_groups, num_features)
    else:
        args = (num_features,)
    try:
        return NORM_LAYERS[name](*args, **kwargs)
    except TypeError as err:
        raise ValueError(f"invalid arguments {kwargs} for norm type {name!r}: {err}") from None
