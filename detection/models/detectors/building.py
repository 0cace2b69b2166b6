"""Building a detector's parts from config with inferred channels: what single- and two-stage detectors share
(the task-neutral pieces are :mod:`oars.models.building`, bound here to the detection registry)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from detection.registry import MODELS
from detection.structures import DetDataSample
from oars.models import building
from oars.models.building import ModuleCfg, out_shape

BACKGROUND_NOTE = "background not counted"



def accepts(cfg: ModuleCfg, arg: str) -> bool:
    """:func:`oars.models.building.accepts` in the detection registry."""
    return building.accepts(MODELS, cfg, arg)


def build_part(owner: str, cfg: ModuleCfg, what: str, default_args: dict[str, Any] | None = None) -> nn.Module:
    """:func:`oars.models.building.build_part` in the detection registry."""
    return building.build_part(MODELS, owner, cfg, what, default_args)


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
    building.check_part_num_classes(owner, cfg, num_classes, what, note=BACKGROUND_NOTE)


def check_model_num_classes(owner: str, num_classes: Any) -> int:
    """The detector's ``num_classes`` (:func:`oars.models.building.check_num_classes`)."""
    return building.check_num_classes(owner, num_classes, note=BACKGROUND_NOTE)


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
