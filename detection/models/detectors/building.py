"""Building a detector's parts from config with inferred channels: what single- and two-stage detectors share."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from detection.registry import MODELS
from detection.structures import DetDataSample

ModuleCfg = dict[str, Any] | nn.Module


def accepts(cfg: ModuleCfg, arg: str) -> bool:
    """Whether the class a config names (or a module's class) takes ``arg`` in its constructor."""
    cls = type(cfg) if isinstance(cfg, nn.Module) else MODELS.get(cfg["type"])
    if cls is None:
        return False
    params = inspect.signature(cls.__init__).parameters
    return arg in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def build_part(owner: str, cfg: ModuleCfg, what: str, default_args: dict[str, Any] | None = None) -> nn.Module:
    """``cfg`` built through ``MODELS`` (a module is used as is); ``ValueError`` naming ``what`` when ``cfg`` is
    not a config dict with a ``type``."""
    if isinstance(cfg, nn.Module):
        return cfg
    if not isinstance(cfg, dict) or "type" not in cfg:
        raise ValueError(f"{owner}: {what} must be a config dict with a 'type' key, got {cfg!r}")
    return MODELS.build(cfg, default_args=default_args)


def out_shape(owner: str, module: nn.Module, what: str) -> tuple[list[int], list[int] | None]:
    """``(out_channels, out_strides or None)`` of a backbone or neck, each as a list (one per level)."""
    channels = getattr(module, "out_channels", None)
    if channels is None:
        raise ValueError(
            f"{owner}: the {what} {type(module).__name__} has no 'out_channels' attribute, needed to infer the "
            "next part's in_channels"
        )
    channels = [channels] if isinstance(channels, int) else list(channels)
    strides = getattr(module, "out_strides", None)
    return channels, None if strides is None else [int(s) for s in strides]


def build_backbone_and_neck(owner: str, backbone: ModuleCfg, neck: ModuleCfg | None
                            ) -> tuple[nn.Module, nn.Module | None, list[int], list[int] | None]:
    """The backbone and optional neck (``in_channels``/``in_strides`` passed from the backbone), with the
    channels and strides of the feature maps the heads receive."""
    backbone_module = build_part(owner, backbone, "backbone")
    channels, strides = out_shape(owner, backbone_module, "backbone")
    neck_module = None
    if neck is not None:
        args: dict[str, Any] = dict(in_channels=channels)
        if strides is not None and accepts(neck, "in_strides"):
            args["in_strides"] = strides
        neck_module = build_part(owner, neck, "neck", args)
        channels, strides = out_shape(owner, neck_module, "neck")
    return backbone_module, neck_module, channels, strides


def check_num_classes(owner: str, cfg: ModuleCfg, num_classes: int, what: str) -> None:
    """A head config must not state a ``num_classes`` of its own that differs from the model's (set it once)."""
    if isinstance(cfg, dict) and "num_classes" in cfg and cfg["num_classes"] != num_classes:
        raise ValueError(
            f"{owner}: {what}.num_classes={cfg['num_classes']} differs from model.num_classes={num_classes}; set "
            "num_classes only on the model (it excludes the background class)"
        )


def check_model_num_classes(owner: str, num_classes: Any) -> int:
    if not isinstance(num_classes, int) or isinstance(num_classes, bool) or num_classes < 1:
        raise ValueError(f"{owner}: num_classes must be an int >= 1 (background not counted), got {num_classes!r}")
    return num_classes


def samples_for(owner: str, inputs: torch.Tensor, data_samples: Sequence[DetDataSample] | None,
                for_loss: bool = False) -> list[DetDataSample]:
    """``data_samples`` checked against ``inputs [B, C, H, W]`` (one per image; for a loss they must exist), or,
    predicting without any, one per image whose original size is the input size."""
    if data_samples is None or (for_loss and not data_samples):
        if for_loss:
            raise ValueError(f"{owner}: mode='loss' needs data_samples carrying gt_instances")
        shape = tuple(inputs.shape[-2:])
        meta = dict(ori_shape=shape, img_shape=shape, batch_input_shape=shape, scale_factor=(1.0, 1.0))
        return [DetDataSample(metainfo=meta) for _ in range(inputs.shape[0])]
    if len(data_samples) != inputs.shape[0]:
        raise ValueError(f"{owner}: {inputs.shape[0]} images but {len(data_samples)} data samples")
    return list(data_samples)
