"""ONNX translations of the custom ops ``oars::nms`` and ``oars::roi_align`` (defined, with their eager
implementations, in :mod:`detection.models.ops`).

Pass :data:`ONNX_TRANSLATIONS` as ``custom_translation_table`` to ``torch.onnx.export(dynamo=True)``: ``oars::nms``
becomes one ONNX ``NonMaxSuppression`` (``center_point_box=0``, thresholds as constant inputs), ``oars::roi_align``
one ``RoiAlign`` (opset >= 16 for ``coordinate_transformation_mode``). The translations live apart from the ops so
that training never imports onnxscript.
"""

from __future__ import annotations

import torch
from onnxscript import opset18 as op

from detection.models.ops import onnx_nms, onnx_roi_align

__all__ = ["ONNX_TRANSLATIONS", "ROI_ALIGN_MIN_OPSET", "onnx_nms", "onnx_roi_align"]

ROI_ALIGN_MIN_OPSET = 16  # coordinate_transformation_mode (aligned) exists from RoiAlign-16 on


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
