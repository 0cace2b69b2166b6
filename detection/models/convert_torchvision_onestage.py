"""torchvision checkpoints of the one-stage detectors -> oars state dicts: SSD300 / SSDLite (``ssd300_vgg16``,
``ssdlite320_mobilenet_v3_large``) and RetinaNet / FCOS (``retinanet_resnet50_fpn``, ``fcos_resnet50_fpn``).

Beside the R-CNN conversion (:mod:`detection.models.convert_torchvision`, whose class selection, errors and file
writing these share); :func:`detection.models.convert_checkpoint.convert_checkpoint_file` recognises each
architecture and calls the matching function here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from .convert_torchvision import (
    SKIPPED_SUFFIX,
    ConversionError,
    key_converts,
    resolve_class_ids,
    torchvision_state_dict,
)
from .necks.fpn import fpn_keys_from_torchvision

_SSD_CLS = "head.classification_head.module_list."
_SSD_REG = "head.regression_head.module_list."


def _ssd_final_key(rest: str) -> bool:
    """``rest`` (after ``module_list.``) names the last conv of a prediction block: ``{i}.weight`` (SSD's 3x3 conv)
    or ``{i}.1.weight`` (SSDLite's 1x1 after the depthwise block); likewise ``bias``."""
    parts = rest.split(".")
    return len(parts) == 2 or (len(parts) == 3 and parts[1] == "1")


def ssd_from_torchvision(checkpoint: Mapping[str, Any], classes: str | Sequence[int] = "all") -> dict[str, Tensor]:
    """Convert a torchvision ``ssd300_vgg16`` / ``ssdlite320_mobilenet_v3_large`` state dict.

    The backbone's names are torchvision's (``SSDVGG``, ``SSDLiteMobileNetV3``); the heads' prediction blocks
    ``head.{classification,regression}_head.module_list.{i}`` become ``bbox_head.{cls,reg}_convs.{i}``. The class
    convs predict ``A x K`` channels per level (anchor-major, torchvision's background first); ours ``A x (C + 1)``
    with the background last, keeping the classes ``classes`` selects (see :func:`rcnn_from_torchvision`).

    Args:
        checkpoint: the loaded file (see :func:`torchvision_state_dict`).
        classes: ``'all'``, ``'coco80'`` or a list of torchvision labels.

    Returns:
        dict: our parameter name -> tensor for ``SingleStageDetector`` with an ``SSDHead`` built from
        ``configs/_base_/models/{ssd300_vgg16,ssdlite_mobilenetv3_320}_torchvision.yaml`` with ``num_classes`` =
        ``len(class ids)``; BatchNorm ``num_batches_tracked`` counters are kept (our BN layers have them).

    Raises:
        ConversionError (a ValueError): a key outside ``backbone.`` / ``head.``, a missing head, or bad ``classes``.
    """
    state = torchvision_state_dict(checkpoint)
    out: dict[str, Tensor] = {}
    cls_final: dict[str, Tensor] = {}
    unknown: list[str] = []
    anchors: dict[str, int] = {}
    for key, value in state.items():
        if key.startswith("backbone."):
            out[key] = value
        elif key.startswith(_SSD_REG):
            rest = key[len(_SSD_REG):]
            out["bbox_head.reg_convs." + rest] = value
            if _ssd_final_key(rest) and rest.endswith("bias"):
                anchors[rest.split(".")[0]] = int(value.shape[0]) // 4
        elif key.startswith(_SSD_CLS):
            rest = key[len(_SSD_CLS):]
            if _ssd_final_key(rest):
                cls_final[rest] = value
            else:
                out["bbox_head.cls_convs." + rest] = value
        else:
            unknown.append(key)
    if unknown:
        raise ConversionError(f"ssd_from_torchvision: {len(unknown)} keys belong to no part of a torchvision SSD / "
                              f"SSDLite (backbone, head): {unknown[:8]}")
    if not cls_final or not anchors or not any(k.startswith("backbone.") for k in out):
        raise ConversionError(f"ssd_from_torchvision: expected a whole torchvision SSD / SSDLite state dict (backbone, "
                              f"head.classification_head, head.regression_head); first keys: {list(state)[:5]}")
    num_outputs = None
    for rest, value in cls_final.items():
        level = rest.split(".")[0]
        if level not in anchors:
            raise ConversionError(f"ssd_from_torchvision: class conv {rest} has no box regression conv")
        num = int(value.shape[0]) // anchors[level]
        if num_outputs is not None and num != num_outputs:
            raise ConversionError(f"ssd_from_torchvision: levels predict {num_outputs} and {num} classes")
        num_outputs = num
    assert num_outputs is not None
    class_ids = resolve_class_ids(classes, num_outputs)
    order = torch.tensor([*class_ids, 0], dtype=torch.long)  # our classes, then the background
    for rest, value in cls_final.items():
        a = anchors[rest.split(".")[0]]
        per_anchor = value.reshape(a, num_outputs, *value.shape[1:])[:, order]
        out["bbox_head.cls_convs." + rest] = per_anchor.reshape(a * len(order), *value.shape[1:]).clone()
    return out


def ssd_num_outputs(checkpoint: Mapping[str, Any]) -> int:
    """torchvision's class outputs (background included) of an SSD checkpoint: level 0's class channels / anchors."""
    state = torchvision_state_dict(checkpoint)
    cls = [v for k, v in state.items() if k.startswith(_SSD_CLS + "0.") and _ssd_final_key(k[len(_SSD_CLS):])
           and k.endswith("bias")]
    reg = [v for k, v in state.items() if k.startswith(_SSD_REG + "0.") and _ssd_final_key(k[len(_SSD_REG):])
           and k.endswith("bias")]
    if not cls or not reg:
        raise ConversionError("ssd_from_torchvision: no level-0 class / box convs in the checkpoint")
    return int(cls[0].shape[0]) // (int(reg[0].shape[0]) // 4)


def is_torchvision_ssd(checkpoint: Mapping[str, Any]) -> bool:
    """Whether a loaded torchvision checkpoint is an SSD / SSDLite (it has ``head.classification_head``)."""
    return any(k.startswith(_SSD_CLS) for k in torchvision_state_dict(checkpoint))


_DENSE_PREFIXES = (("backbone.body.", "backbone."), ("head.", "bbox_head."))
_RETINA_V1_CONV = re.compile(r"^(head\.(?:classification|regression)_head\.conv)\.(\d+)\.(weight|bias)$")


def _dense_select_classes(logits: dict[str, Tensor], class_ids: Sequence[int], num_outputs: int
                          ) -> dict[str, Tensor]:
    """Keep the outputs ``class_ids`` (torchvision labels, 0 = background) of ``cls_logits`` laid out
    (anchor, class): weight ``[A * K, C_in, 3, 3]``, bias ``[A * K]``."""
    ids = torch.tensor(list(class_ids), dtype=torch.long)
    out = {}
    for key, value in logits.items():
        per_anchor = value.reshape(-1, num_outputs, *value.shape[1:])
        out[key] = per_anchor[:, ids].reshape(-1, *value.shape[1:]).clone()
    return out


def dense_from_torchvision(checkpoint: Mapping[str, Any], classes: str | Sequence[int] = "all"
                           ) -> dict[str, Tensor]:
    """Convert a torchvision ``retinanet_resnet50_fpn`` / ``fcos_resnet50_fpn`` state dict.

    Args:
        checkpoint: the loaded file (see :func:`torchvision_state_dict`). RetinaNet checkpoints saved before
            torchvision 0.13 (towers as ``conv.{0,2,4,6}``) are accepted as well as the current layout
            (``conv.{i}.0``).
        classes: which of torchvision's outputs become our classes (see the module docstring): ``'all'``
            (``num_classes`` = outputs - 1; output 0, the never-trained background, is dropped), ``'coco80'`` or
            a list of torchvision labels.

    Returns:
        dict: our parameter name -> tensor for ``SingleStageDetector`` built from
        ``configs/_base_/models/{retinanet,fcos}_r50_fpn_torchvision.yaml`` with ``num_classes`` = the number of
        kept classes. BatchNorm ``num_batches_tracked`` counters are dropped.

    Raises:
        ConversionError (a ValueError): keys of no part of these models, a missing part, or bad ``classes``.
    """
    state = torchvision_state_dict(checkpoint)
    fcos = any(k.startswith("head.regression_head.bbox_ctrness.") for k in state)
    out: dict[str, Tensor] = {}
    fpn_part: dict[str, Any] = {}
    unknown: list[str] = []
    for key, value in state.items():
        if key.endswith(SKIPPED_SUFFIX):
            continue
        if key.startswith("backbone.fpn."):
            fpn_part[key] = value
            continue
        if not fcos and (m := _RETINA_V1_CONV.match(key)):  # pre-0.13 RetinaNet: Sequential(conv, relu, ...)
            key = f"{m[1]}.{int(m[2]) // 2}.0.{m[3]}"
        for src, dst in _DENSE_PREFIXES:
            if key.startswith(src):
                out[dst + key[len(src):]] = value
                break
        else:
            unknown.append(key)
    logit_keys = [f"bbox_head.classification_head.cls_logits.{n}" for n in ("weight", "bias")]
    if unknown or not fpn_part or any(k not in out for k in logit_keys):
        raise ConversionError(
            f"dense_from_torchvision: expected a torchvision RetinaNet / FCOS (backbone.body, backbone.fpn, head); "
            f"keys of no part: {unknown[:8]}, FPN keys: {len(fpn_part)}, class logits: "
            f"{all(k in out for k in logit_keys)}")
    fpn = fpn_keys_from_torchvision(fpn_part)
    if len(fpn) != len(fpn_part):
        orphans = [k for k, v in fpn_part.items() if not key_converts(fpn_keys_from_torchvision, k, v)]
        raise ConversionError(f"dense_from_torchvision: FPN keys without a counterpart: {orphans}")
    out.update({f"neck.{k}": v for k, v in fpn.items()})
    reg_out = out["bbox_head.regression_head.bbox_reg.weight"].shape[0]
    num_anchors = reg_out // 4
    num_outputs = out[logit_keys[1]].shape[0] // num_anchors
    class_ids = resolve_class_ids(classes, num_outputs)
    out.update(_dense_select_classes({k: out[k] for k in logit_keys}, class_ids, num_outputs))
    return out


def is_torchvision_dense(checkpoint: Mapping[str, Any]) -> bool:
    """Whether a loaded torchvision checkpoint is a RetinaNet / FCOS (class tower ``head.classification_head.conv``
    and ``cls_logits``; SSD's heads are ``module_list``)."""
    return any(k.startswith("head.classification_head.cls_logits.") for k in torchvision_state_dict(checkpoint))


def dense_num_classes(state: Mapping[str, Tensor]) -> int:
    """Classes of a converted RetinaNet / FCOS state dict: class logits per anchor (anchors = box outputs / 4)."""
    anchors = int(state["bbox_head.regression_head.bbox_reg.bias"].shape[0]) // 4
    return int(state["bbox_head.classification_head.cls_logits.bias"].shape[0]) // anchors
