"""ONNX ``NonMaxSuppression`` as a PyTorch custom op, so NMS exports as one ONNX op with the dynamo exporter.

Why a custom op: ``torch.onnx.export(dynamo=True)`` cannot trace torchvision's ``batched_nms`` (its output size
depends on the data: ``GuardOnDataDependentSymNode``), and the TorchScript exporter is deprecated. ``oars::nms``
has an eager implementation with exactly the ONNX semantics (torchvision ``batched_nms`` with one group per
image and class), a fake
implementation whose first dimension is a fresh unbacked size, and an onnxscript translation that emits
``NonMaxSuppression``. Pass :data:`ONNX_TRANSLATIONS` as ``custom_translation_table`` to ``torch.onnx.export``.
"""

from __future__ import annotations

import torch
from onnxscript import opset18 as op
from torch import Tensor
from torchvision.ops import batched_nms


@torch.library.custom_op("oars::nms", mutates_args=())
def onnx_nms(
    boxes: Tensor, scores: Tensor, max_output_boxes_per_class: int, iou_threshold: float, score_threshold: float
) -> Tensor:
    """ONNX ``NonMaxSuppression`` (``center_point_box=0``) in eager PyTorch.

    Args:
        boxes: [B, N, 4] corner boxes (any diagonal pair; we pass x1, y1, x2, y2).
        scores: [B, C, N] per-class scores.
        max_output_boxes_per_class: at most this many boxes kept per (image, class) (<= 0: none, as ONNX).
        iou_threshold: a box is suppressed by a higher-scored one of the same class when IoU > this.
        score_threshold: only boxes with score > this take part.

    Returns:
        selected [K, 3] int64 (batch index, class index, box index), per (image, class) by decreasing score.
    """
    num_classes = scores.shape[1]
    cand = (scores > score_threshold).nonzero()  # [M, 3] (image, class, box)
    if max_output_boxes_per_class <= 0 or cand.shape[0] == 0:
        return torch.zeros((0, 3), dtype=torch.int64, device=boxes.device)
    group = cand[:, 0] * num_classes + cand[:, 1]  # one NMS group per (image, class), all in one call
    keep = batched_nms(boxes[cand[:, 0], cand[:, 2]].float(), scores[cand[:, 0], cand[:, 1], cand[:, 2]].float(),
                       group, iou_threshold)  # decreasing score
    order = torch.sort(group[keep], stable=True).indices  # groups in (image, class) order, scores still decreasing
    kept, kept_group = cand[keep][order], group[keep][order]
    starts = torch.searchsorted(kept_group, kept_group, right=False)  # first position of each row's group
    rank = torch.arange(len(kept_group), device=kept_group.device) - starts
    return kept[rank < max_output_boxes_per_class]


@onnx_nms.register_fake
def _onnx_nms_fake(
    boxes: Tensor, scores: Tensor, max_output_boxes_per_class: int, iou_threshold: float, score_threshold: float
) -> Tensor:
    num = torch.library.get_ctx().new_dynamic_size()
    return boxes.new_empty((num, 3), dtype=torch.int64)


def _nms_to_onnx(boxes, scores, max_output_boxes_per_class: int, iou_threshold: float, score_threshold: float):
    """onnxscript translation of ``oars::nms``: the standard op, thresholds as constant inputs."""
    return op.NonMaxSuppression(
        boxes,
        scores,
        op.Constant(value_ints=[max_output_boxes_per_class]),
        op.Constant(value_floats=[iou_threshold]),
        op.Constant(value_floats=[score_threshold]),
        center_point_box=0,
    )


# custom_translation_table for torch.onnx.export(dynamo=True)
ONNX_TRANSLATIONS = {torch.ops.oars.nms.default: _nms_to_onnx}
