"""torchvision Faster / Mask R-CNN RoI-head weights -> this package's ``StandardRoIHead`` parameter names.

torchvision's box head is the same network as ``Shared2FCBBoxHead`` (``TwoMLPHead`` fc6/fc7 +
``FastRCNNPredictor``) and its mask head the same as ``FCNMaskHead`` (``MaskRCNNHeads`` + ``MaskRCNNPredictor``),
but torchvision puts the background class FIRST and predicts a box and a mask for it too. The conversion moves
the background row of ``cls_score`` to the end (MMDetection's order, ours) and drops the background's box deltas
and mask channel. Its box coder weights (10, 10, 5, 5) are our ``target_stds`` (0.1, 0.1, 0.2, 0.2); to compute
what torchvision computes, pool with ``level_mapping: torchvision`` and ``roi_layer: {sampling_ratio: 2,
aligned: false}`` (see :class:`SingleRoIExtractor`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import torch

_RENAMES = [
    (re.compile(r"(?:^|\.)box_head\.fc6\.(weight|bias)$"), "bbox_head.shared_fcs.0.{}"),
    (re.compile(r"(?:^|\.)box_head\.fc7\.(weight|bias)$"), "bbox_head.shared_fcs.1.{}"),
    (re.compile(r"(?:^|\.)mask_predictor\.conv5_mask\.(weight|bias)$"), "mask_head.upsample.{}"),
]
_MASK_CONV = re.compile(r"(?:^|\.)mask_head\.(?:(\d+)\.0|mask_fcn(\d+))\.(weight|bias)$")
_CLS = re.compile(r"(?:^|\.)box_predictor\.cls_score\.(weight|bias)$")
_REG = re.compile(r"(?:^|\.)box_predictor\.bbox_pred\.(weight|bias)$")
_MASK_LOGITS = re.compile(r"(?:^|\.)mask_predictor\.mask_fcn_logits\.(weight|bias)$")


def roi_head_from_torchvision(state_dict: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """Rename (and reorder) the RoI-head part of a torchvision Faster/Mask R-CNN state dict.

    Accepts a whole ``fasterrcnn_*`` / ``maskrcnn_*`` model's state dict (keys under ``roi_heads.``) or the
    heads' own; other keys are dropped.

    Args:
        state_dict: torchvision parameter name -> tensor.

    Returns:
        dict: ``StandardRoIHead`` parameter name (``bbox_head.shared_fcs.0.weight``, ``bbox_head.fc_cls.weight``
        ``[C + 1, 1024]`` with background last, ``bbox_head.fc_reg.weight`` ``[4 C, 1024]``,
        ``mask_head.convs.{i}.0.*``, ``mask_head.upsample.*``, ``mask_head.conv_logits.weight`` ``[C, 256, 1,
        1]``) -> tensor, for ``roi_head.load_state_dict`` (prefix ``roi_head.`` for a whole detector).

    Raises:
        ValueError: no RoI-head key in ``state_dict``.
    """
    out: dict[str, torch.Tensor] = {}
    for key, value in state_dict.items():
        for pattern, target in _RENAMES:
            if m := pattern.search(key):
                out[target.format(m[1])] = value
        if m := _MASK_CONV.search(key):
            index = int(m[1]) if m[1] is not None else int(m[2]) - 1  # older torchvision: mask_fcn1..4
            out[f"mask_head.convs.{index}.0.{m[3]}"] = value
        elif m := _CLS.search(key):
            out[f"bbox_head.fc_cls.{m[1]}"] = torch.cat([value[1:], value[:1]])  # background first -> last
        elif m := _REG.search(key):
            out[f"bbox_head.fc_reg.{m[1]}"] = value[4:]  # drop the background's 4 deltas
        elif m := _MASK_LOGITS.search(key):
            out[f"mask_head.conv_logits.{m[1]}"] = value[1:]  # drop the background's mask
    if not out:
        raise ValueError(
            "roi_head_from_torchvision: no RoI-head key (box_head.fc6/fc7, box_predictor.*, mask_head.*, "
            f"mask_predictor.*) in the state dict; first keys: {list(state_dict)[:5]}"
        )
    return out
