"""ONNX ``NonMaxSuppression`` as a PyTorch custom op, so NMS exports as one ONNX op with the dynamo exporter.

Why a custom op: ``torch.onnx.export(dynamo=True)`` cannot trace torchvision's ``batched_nms`` (its output size
depends on the data: ``GuardOnDataDependentSymNode``), and the TorchScript exporter is deprecated. ``oars::nms``
has an eager implementation with exactly the ONNX semantics (torchvision ``nms`` per image and class), a fake
implementation whose first dimension is a fresh unbacked size, and an onnxscript translation that emits
``NonMaxSuppression``. Pass :data:`ONNX_TRANSLATIONS` as ``custom_translation_table`` to ``torch.onnx.export``.
"""

from __future__ import annotations

import torch
from onnxscript import opset18 as op
from torch import Tensor
from torchvision.ops import nms as tv_nms


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
    out = []
    if max_output_boxes_per_class > 0:
        for b in range(scores.shape[0]):
            for c in range(scores.shape[1]):
                idx = (scores[b, c] > score_threshold).nonzero().squeeze(1)
                if idx.numel() == 0:
                    continue
                keep = tv_nms(boxes[b, idx].float(), scores[b, c, idx].float(), iou_threshold)
                kept = idx[keep[:max_output_boxes_per_class]]
                out.append(torch.stack([torch.full_like(kept, b), torch.full_like(kept, c), kept], dim=1))
    if not out:
        return torch.zeros((0, 3), dtype=torch.int64, device=boxes.device)
    return torch.cat(out)


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
