"""torchvision Faster / Mask R-CNN, RetinaNet and FCOS R50-FPN checkpoints -> this package's detectors.

RetinaNet / FCOS (:func:`dense_from_torchvision`): ``backbone.body`` -> ``backbone``, ``backbone.fpn`` -> ``neck``
(``extra_blocks.p6/p7`` -> ``extra_convs``), ``head`` -> ``bbox_head`` with the same names (our ``RetinaHead`` /
``FCOSHead`` are laid out as torchvision's); only the class logits are cut to the kept classes. Their sigmoid
classifiers score every class on its own, so dropping outputs changes no kept score.

SSD300 VGG-16 / SSDLite320 MobileNetV3-Large (:func:`ssd_from_torchvision`): ``backbone`` keeps its names (our
``SSDVGG`` / ``SSDLiteMobileNetV3`` are laid out as torchvision's), ``head.{classification,regression}_head.
module_list.{i}`` -> ``bbox_head.{cls,reg}_convs.{i}``; the class convs' background moves from first to last within
each anchor's block of outputs (a softmax classifier: ``coco80`` renormalises as for the R-CNNs).

The parameter names already match torchvision's part by part (ResNet, FPN ``inner_blocks``/``layer_blocks``, RPN
``conv``/``cls_logits``/``bbox_pred``); what differs is the prefixes and the RoI classifier, whose background
class torchvision puts FIRST and which predicts a box and a mask for it (ours: ``num_classes`` foreground classes,
background LAST, no background box or mask; :func:`roi_head_from_torchvision`).

Labels. torchvision's COCO models have 91 outputs: 0 is the background and output ``i`` is COCO category id ``i``
(ids 1..90, of which 10 are unused: :data:`COCO_UNUSED_IDS`). Two conversions:

- ``classes='all'`` (``num_classes: 90``): every output is kept; our label ``k`` is torchvision's label ``k + 1``
  = COCO category id ``k + 1``. Scores are torchvision's exactly (the same 91-way softmax).
- ``classes='coco80'`` (``num_classes: 80``): the outputs of the 80 COCO categories, in category-id order; our
  label ``k`` is :data:`COCO80_CATEGORY_IDS` ``[k]``, which is also ``CocoDataset``'s class index ``k`` (its
  default classes are COCO's in that order), so COCO evaluation works unchanged. The 10 unused outputs are dropped,
  so a score is torchvision's divided by ``1 - p(unused)`` (the softmax is over 81 instead of 91 logits); boxes
  are the same. torchvision's COCO weights never saw the unused ids as positives, so this is tiny.
- a list of torchvision label indices: keep those outputs, in that order (a fine-tuned model's subset).

Norm layers: torchvision's legacy COCO checkpoints (``*_COCO_V1``) are used with ``FrozenBatchNorm2d`` of
``eps = 0`` (``overwrite_eps(model, 0.0)``), which the ``torchvision`` presets set; a model trained from
``weights_backbone=None`` uses ``nn.BatchNorm2d`` (``eps = 1e-5``): override ``model.backbone.norm.eps``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from detection.models.necks.fpn import fpn_keys_from_torchvision
from detection.models.roi_heads.convert import roi_head_from_torchvision
from oars.errors import OarsError


class ConversionError(OarsError, ValueError):
    """A torchvision checkpoint that cannot be converted (or does not fit the model it is meant for)."""

COCO_UNUSED_IDS: tuple[int, ...] = (12, 26, 29, 30, 45, 66, 68, 69, 71, 83)
"""COCO category ids 1..90 with no category (torchvision's ``'N/A'`` outputs)."""
COCO80_CATEGORY_IDS: tuple[int, ...] = tuple(i for i in range(1, 91) if i not in COCO_UNUSED_IDS)
"""The 80 COCO category ids in increasing order: our class ``k`` (``classes='coco80'``) and torchvision's label."""
CLASS_CHOICES = ("all", "coco80")

_PREFIXES = (("backbone.body.", "backbone."), ("rpn.head.", "rpn_head."))
SKIPPED_SUFFIX = ".num_batches_tracked"  # nn.BatchNorm2d's counter; FrozenBN has none


def torchvision_state_dict(checkpoint: Mapping[str, Any]) -> Mapping[str, Any]:
    """The model state dict inside a loaded torchvision checkpoint.

    Accepts the state dict itself (what ``torch.hub`` downloads and ``model.state_dict()`` gives), torchvision's
    reference-scripts checkpoint (``{'model': ..., 'optimizer': ...}``) or a ``{'state_dict': ...}`` one.

    Raises:
        ConversionError (a ValueError): no tensor found at the top level nor under ``model`` / ``state_dict``.
    """
    for key in ("model", "state_dict"):
        inner = checkpoint.get(key) if isinstance(checkpoint, Mapping) else None
        if isinstance(inner, Mapping):
            return inner
    if isinstance(checkpoint, Mapping) and any(isinstance(v, Tensor) for v in checkpoint.values()):
        return checkpoint
    keys = list(checkpoint)[:5] if isinstance(checkpoint, Mapping) else "-"
    raise ConversionError(
        "torchvision_state_dict: expected a state dict (parameter name -> tensor) or a checkpoint with a 'model' "
        f"or 'state_dict' entry, got {type(checkpoint).__name__} with keys {keys}"
    )


def resolve_class_ids(classes: str | Sequence[int], num_outputs: int) -> list[int]:
    """torchvision label indices to keep, in our class order.

    Args:
        classes: ``'all'`` (1 .. num_outputs - 1), ``'coco80'`` (:data:`COCO80_CATEGORY_IDS`, needs 91 outputs) or
            a list of torchvision label indices (each in ``[1, num_outputs)``, no repeats; 0 is the background).
        num_outputs: torchvision's classifier outputs, background included (91 for COCO).

    Returns:
        ``class_ids`` with ``class_ids[k]`` = the torchvision label of our class ``k``.

    Raises:
        ConversionError (a ValueError): an unknown name, ``'coco80'`` for a classifier that is not COCO's
            91-way one, or a bad list.
    """
    if isinstance(classes, str):
        if classes not in CLASS_CHOICES:
            raise ConversionError(f"classes={classes!r} is invalid; accepted: {list(CLASS_CHOICES)} or a list of "
                             "torchvision label indices")
        if classes == "all":
            return list(range(1, num_outputs))
        if num_outputs != 91:
            raise ConversionError(f"classes='coco80' needs torchvision's 91-way COCO classifier, the checkpoint has "
                             f"{num_outputs} outputs; use classes='all' or a list of label indices")
        return list(COCO80_CATEGORY_IDS)
    try:
        ids = [int(c) for c in classes]
    except (TypeError, ValueError):
        raise ConversionError(f"classes={classes!r} must be 'all', 'coco80' or torchvision label indices") from None
    if not ids or len(set(ids)) != len(ids) or min(ids) < 1 or max(ids) >= num_outputs:
        raise ConversionError(f"classes={list(classes)} must be distinct torchvision label indices in [1, "
                         f"{num_outputs - 1}] (0 is the background)")
    return ids


def _select_classes(roi: dict[str, Tensor], class_ids: Sequence[int]) -> dict[str, Tensor]:
    """Keep our classes ``class_ids`` (torchvision labels) of converted RoI-head tensors (background last)."""
    num_fg = roi["bbox_head.fc_cls.weight"].shape[0] - 1
    fg = torch.tensor([c - 1 for c in class_ids], dtype=torch.long)  # roi_head_from_torchvision dropped label 0
    out = dict(roi)
    for name in ("weight", "bias"):
        cls = roi[f"bbox_head.fc_cls.{name}"]
        out[f"bbox_head.fc_cls.{name}"] = torch.cat([cls[fg], cls[num_fg:]])
        reg = roi[f"bbox_head.fc_reg.{name}"]
        out[f"bbox_head.fc_reg.{name}"] = reg.reshape(num_fg, 4, *reg.shape[1:])[fg].reshape(-1, *reg.shape[1:])
        key = f"mask_head.conv_logits.{name}"
        if key in roi:
            out[key] = roi[key][fg]
    return out


def key_converts(convert: Any, key: str, value: Any) -> bool:
    try:
        return bool(convert({key: value}))
    except ValueError:
        return False


def rcnn_from_torchvision(checkpoint: Mapping[str, Any], classes: str | Sequence[int] = "all"
                          ) -> dict[str, Tensor]:
    """Convert a torchvision ``fasterrcnn_resnet50_fpn`` / ``maskrcnn_resnet50_fpn`` state dict.

    Args:
        checkpoint: the loaded file (see :func:`torchvision_state_dict`): torchvision parameter name -> tensor.
        classes: which of torchvision's outputs become our classes (see the module docstring):
            ``'all'`` (exact; ``num_classes`` = outputs - 1), ``'coco80'`` or a list of torchvision labels.

    Returns:
        dict: our parameter name -> tensor for ``FasterRCNN`` / ``MaskRCNN`` built from
        ``configs/_base_/models/{faster,mask}_rcnn_r50_fpn_torchvision.yaml`` with ``num_classes`` =
        ``len(class ids)``: ``backbone.*`` (from ``backbone.body.*``), ``neck.*`` (``backbone.fpn.*``),
        ``rpn_head.*`` (``rpn.head.*``), ``roi_head.*`` (``roi_heads.*``, background moved last). BatchNorm
        ``num_batches_tracked`` counters are dropped.

    Raises:
        ConversionError (a ValueError): a key of none of those parts (another architecture, e.g. a keypoint
            head), a missing part, or bad ``classes``.
    """
    state = torchvision_state_dict(checkpoint)
    out: dict[str, Tensor] = {}
    unknown: list[str] = []
    roi_part: dict[str, Any] = {}
    fpn_part: dict[str, Any] = {}
    for key, value in state.items():
        if key.endswith(SKIPPED_SUFFIX):
            continue
        if key.startswith("backbone.fpn."):
            fpn_part[key] = value
        elif key.startswith("roi_heads."):
            roi_part[key] = value
        else:
            for src, dst in _PREFIXES:
                if key.startswith(src):
                    out[dst + key[len(src):]] = value
                    break
            else:
                unknown.append(key)
    if unknown:
        raise ConversionError(
            f"rcnn_from_torchvision: {len(unknown)} keys belong to no part of a Faster/Mask R-CNN R50-FPN "
            f"(backbone.body, backbone.fpn, rpn.head, roi_heads): {unknown[:8]}"
        )
    present = {"backbone.body": any(k.startswith("backbone.") for k in out), "backbone.fpn": bool(fpn_part),
               "rpn.head": any(k.startswith("rpn_head.") for k in out), "roi_heads": bool(roi_part)}
    missing = [name for name, found in present.items() if not found]
    if missing:
        raise ConversionError(f"rcnn_from_torchvision: the state dict has no {missing} keys; expected a whole "
                              f"torchvision Faster/Mask R-CNN (first keys: {list(state)[:5]})")
    fpn = fpn_keys_from_torchvision(fpn_part)
    roi = roi_head_from_torchvision(roi_part)
    for part, convert, done in ((fpn_part, fpn_keys_from_torchvision, fpn),
                                (roi_part, roi_head_from_torchvision, roi)):
        if len(done) != len(part):  # some keys have no counterpart here: name them
            unknown += [k for k, v in part.items() if not key_converts(convert, k, v)]
    if unknown:
        raise ConversionError(
            f"rcnn_from_torchvision: {len(unknown)} keys belong to no part of a Faster/Mask R-CNN R50-FPN "
            f"(e.g. a keypoint head): {unknown[:8]}"
        )
    out.update({f"neck.{k}": v for k, v in fpn.items()})
    num_outputs = roi["bbox_head.fc_cls.weight"].shape[0]
    class_ids = resolve_class_ids(classes, num_outputs)
    if class_ids != list(range(1, num_outputs)):
        roi = _select_classes(roi, class_ids)
    out.update({f"roi_head.{k}": v for k, v in roi.items()})
    return out


def coco_category_ids(labels: Tensor, classes: str | Sequence[int] = "coco80") -> Tensor:
    """COCO category ids (torchvision's labels) of our predicted labels after a conversion with ``classes``.

    Args:
        labels: int64 ``[K]`` our class indices (``pred_instances.labels``).
        classes: what the conversion was given (``'all'``: id = label + 1; ``'coco80'``: the k-th used id; a list:
            its entries).

    Returns:
        int64 ``[K]`` on ``labels``' device.
    """
    if isinstance(classes, str) and classes == "all":
        return labels.long() + 1
    table = resolve_class_ids(classes, 91) if isinstance(classes, str) else [int(c) for c in classes]
    return torch.tensor(table, dtype=torch.long, device=labels.device)[labels.long()]
