"""Checkpoint converters: torchvision video models -> oars video recognizers."""

from __future__ import annotations

from collections.abc import Mapping

import torch


def convert_torchvision_r2plus1d(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A torchvision ``r2plus1d_18`` (``VideoResNet``) state dict -> the state dict of a ``Recognizer3D`` with an
    ``R2Plus1D`` backbone and an ``I3DHead``.

    The backbone's names are torchvision's (``stem.*``, ``layer1.*`` ...), so they only gain the ``backbone.``
    prefix; torchvision's classifier ``fc.{weight,bias}`` becomes the head's ``cls_head.fc_cls.{weight,bias}``.
    The recognizer's ``num_classes`` must equal the rows of ``fc.weight`` (400 for the Kinetics-400 weights) for
    the head to load; to fine-tune on other classes load only the backbone (``pretrained: PATH`` on R2Plus1D,
    which skips ``fc.*``).

    Args:
        state_dict: torchvision's keys -> tensors.

    Returns:
        a new dict with the recognizer's keys (the same tensors, not copied).

    Raises:
        ValueError: a key is neither torchvision's stem/layers nor ``fc``, i.e. not a torchvision video ResNet.
    """
    out: dict[str, torch.Tensor] = {}
    for key, value in state_dict.items():
        if key.startswith(("stem.", "layer1.", "layer2.", "layer3.", "layer4.")):
            out[f"backbone.{key}"] = value
        elif key in ("fc.weight", "fc.bias"):
            out[f"cls_head.fc_cls.{key[3:]}"] = value
        else:
            raise ValueError(f"convert_torchvision_r2plus1d: unexpected key {key!r}; expected the state dict of "
                             "torchvision.models.video.r2plus1d_18 (stem.*, layer1-4.*, fc.*)")
    return out
