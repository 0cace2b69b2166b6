"""ONNX ``NonMaxSuppression`` and ``RoiAlign`` as PyTorch custom ops, so each exports as one ONNX op with the
dynamo exporter.

Why a custom op: ``torch.onnx.export(dynamo=True)`` cannot trace torchvision's ``batched_nms`` (its output size
depends on the data: ``GuardOnDataDependentSymNode``), and the TorchScript exporter is deprecated. ``oars::nms``
has an eager implementation with exactly the ONNX semantics (torchvision ``batched_nms`` with one group per
image and class), a fake
implementation whose first dimension is a fresh unbacked size, and an onnxscript translation that emits
``NonMaxSuppression``. Pass :data:`ONNX_TRANSLATIONS` as ``custom_translation_table`` to ``torch.onnx.export``.

``oars::roi_align`` is torchvision's ``roi_align`` (eagerly) with ONNX ``RoiAlign``'s inputs (boxes and batch
indices apart); the exporter has no translation for ``torchvision::roi_align``. Its ONNX form needs opset >= 16:
``coordinate_transformation_mode`` ``half_pixel`` is ``aligned=True``, ``output_half_pixel`` ``aligned=False``;
``sampling_ratio`` 0 is adaptive (``ceil(roi size / output size)`` samples per bin) in both.
"""

from __future__ import annotations

import torch
from onnxscript import opset18 as op
from torch import Tensor
from torchvision.ops import batched_nms, roi_align

ROI_ALIGN_MIN_OPSET = 16  # coordinate_transformation_mode (aligned) exists from RoiAlign-16 on


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


@torch.library.custom_op("oars::roi_align", mutates_args=())
def onnx_roi_align(
    feat: Tensor, boxes: Tensor, batch_indices: Tensor, output_height: int, output_width: int,
    spatial_scale: float, sampling_ratio: int, aligned: bool,
) -> Tensor:
    """ONNX ``RoiAlign`` (``mode='avg'``) in eager PyTorch: ``torchvision.ops.roi_align``.

    Args:
        feat: [B, C, H, W] float32 feature map.
        boxes: [R, 4] float32 x1, y1, x2, y2 in input pixels (scaled by ``spatial_scale`` onto ``feat``).
        batch_indices: [R] int64 image of each box.
        output_height, output_width: pooled size.
        spatial_scale: feature pixels per input pixel (1 / stride).
        sampling_ratio: samples per bin side; 0: adaptive, ``ceil(roi size / output size)``.
        aligned: the half-pixel shift (ONNX ``half_pixel``); False: ``output_half_pixel``.

    Returns:
        [R, C, output_height, output_width] float32.
    """
    rois = torch.cat([batch_indices.to(boxes.dtype)[:, None], boxes], dim=1)
    return roi_align(feat, rois, (output_height, output_width), spatial_scale=spatial_scale,
                     sampling_ratio=sampling_ratio, aligned=aligned)


@onnx_roi_align.register_fake
def _onnx_roi_align_fake(
    feat: Tensor, boxes: Tensor, batch_indices: Tensor, output_height: int, output_width: int,
    spatial_scale: float, sampling_ratio: int, aligned: bool,
) -> Tensor:
    return feat.new_empty((boxes.shape[0], feat.shape[1], output_height, output_width))


def _roi_align_to_onnx(feat, boxes, batch_indices, output_height: int, output_width: int, spatial_scale: float,
                       sampling_ratio: int, aligned: bool):
    """onnxscript translation of ``oars::roi_align``: ``RoiAlign`` (opset >= 16)."""
    return op.RoiAlign(
        feat,
        boxes,
        batch_indices,
        coordinate_transformation_mode="half_pixel" if aligned else "output_half_pixel",
        mode="avg",
        output_height=output_height,
        output_width=output_width,
        sampling_ratio=sampling_ratio,
        spatial_scale=spatial_scale,
    )


# custom_translation_table for torch.onnx.export(dynamo=True)
ONNX_TRANSLATIONS = {torch.ops.oars.nms.default: _nms_to_onnx, torch.ops.oars.roi_align.default: _roi_align_to_onnx}
