"""Building a model's parts from config: one implementation for every task.

Why here: detectors, segmentors and recognizers all build a backbone, maybe a neck, and heads from config dicts,
infer each part's ``in_channels`` from the previous one's ``out_channels``, and take ``num_classes`` once at the
model. Each task passes its own registry (its scope's ``MODELS``), so the core names no task.
"""

from __future__ import annotations

import inspect
from typing import Any

from mmengine.registry import Registry
from torch import nn

ModuleCfg = dict[str, Any] | nn.Module


def accepts(registry: Registry, cfg: ModuleCfg, arg: str) -> bool:
    """Whether the class a config names (looked up in ``registry``), or a module's class, takes ``arg`` in its
    constructor (a ``**kwargs`` constructor takes anything). Used to pass inferred arguments only to parts that
    declare them."""
    cls = type(cfg) if isinstance(cfg, nn.Module) else registry.get(cfg["type"])
    if cls is None:
        return False
    params = inspect.signature(cls.__init__).parameters
    return arg in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def build_part(registry: Registry, owner: str, cfg: ModuleCfg, what: str,
               default_args: dict[str, Any] | None = None) -> nn.Module:
    """``cfg`` built through ``registry`` with ``default_args`` (a module is used as is).

    Raises:
        ValueError: ``cfg`` is not a config dict with a ``type`` (naming ``owner`` and ``what``).
    """
    if isinstance(cfg, nn.Module):
        return cfg
    if not isinstance(cfg, dict) or "type" not in cfg:
        raise ValueError(f"{owner}: {what} must be a config dict with a 'type' key, got {cfg!r}")
    return registry.build(cfg, default_args=default_args)


def out_shape(owner: str, module: nn.Module, what: str) -> tuple[list[int], list[int] | None]:
    """``(out_channels, out_strides or None)`` of a backbone or neck, each as a list (one per level).

    Raises:
        ValueError: the module has no ``out_channels`` attribute (the next part's ``in_channels`` cannot be
            inferred).
    """
    channels = getattr(module, "out_channels", None)
    if channels is None:
        raise ValueError(
            f"{owner}: the {what} {type(module).__name__} has no 'out_channels' attribute, needed to infer the "
            "next part's in_channels"
        )
    channels = [channels] if isinstance(channels, int) else list(channels)
    strides = getattr(module, "out_strides", None)
    return channels, None if strides is None else [int(s) for s in strides]


def check_num_classes(owner: str, num_classes: Any, minimum: int = 1, note: str = "") -> int:
    """``num_classes`` when it is an int >= ``minimum`` (a bool is not); the one check every model and head runs.

    Args:
        owner: the class checking, named in the message.
        num_classes: the value given.
        minimum: the smallest valid count (segmentors: 2, foreground and background).
        note: what the count means, for the message (e.g. "background not counted").

    Raises:
        ValueError: naming ``owner``, what was expected and the value.
    """
    if not isinstance(num_classes, int) or isinstance(num_classes, bool) or num_classes < minimum:
        extra = f" ({note})" if note else ""
        raise ValueError(f"{owner}: num_classes must be an int >= {minimum}{extra}, got {num_classes!r}")
    return num_classes


def check_part_num_classes(owner: str, cfg: ModuleCfg, num_classes: int, what: str, note: str = "") -> None:
    """A part's config must not state a ``num_classes`` of its own that differs from the model's (set it once).

    Raises:
        ValueError: naming both values and where to set the count.
    """
    if isinstance(cfg, dict) and "num_classes" in cfg and cfg["num_classes"] != num_classes:
        extra = f" ({note})" if note else ""
        raise ValueError(f"{owner}: {what}.num_classes={cfg['num_classes']} differs from model.num_classes="
                         f"{num_classes}; set num_classes only on the model{extra}")
