"""The two operators whose eager and exported forms differ, as PyTorch custom ops: ``oars::nms`` (ONNX
``NonMaxSuppression``) and ``oars::roi_align`` (ONNX ``RoiAlign``).

Why here, in the models: the two-stage detectors' inference (:mod:`detection.models.roi_heads.two_stage_infer`)
is written once, with static shapes, and calls these ops in eager mode as in export. Eagerly ``oars::nms`` IS
torchvision's ``batched_nms`` (one group per image and class) and ``oars::roi_align`` torchvision's
``roi_align``; ``torch.onnx.export`` turns each into one ONNX op through the translations in
:mod:`detection.export.nms_op` (``custom_translation_table``), which keeps onnxscript out of training imports.
``torch.onnx.export(dynamo=True)`` could not trace ``batched_nms`` itself (its output size depends on the data:
``GuardOnDataDependentSymNode``): the fake implementation below gives the op a fresh unbacked size instead.

``oars::roi_align``: ONNX ``RoiAlign`` from opset 16 has ``coordinate_transformation_mode`` (``half_pixel`` is
``aligned=True``, ``output_half_pixel`` ``aligned=False``); ``sampling_ratio`` 0 is adaptive
(``ceil(roi size / output size)`` samples per bin) in both.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torchvision.ops import batched_nms, roi_align

LABEL_PAD = -1  # label of padding rows in fixed-size detection outputs (eager two-stage inference and exports)


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
