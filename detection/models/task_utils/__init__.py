"""Target assignment, sampling, box coding, anchors and post-processing shared by detection heads.

The classes a config swaps are registered in ``detection.registry.TASK_UTILS`` (MMDetection's habit).
"""

from .anchor_generator import AnchorGenerator
from .bbox_coder import DeltaXYWHBBoxCoder
from .max_iou_assigner import AssignResult, MaxIoUAssigner, box_iof
from .postprocess import multiclass_nms
from .samplers import PseudoSampler, RandomSampler, SamplingResult
from .yolo_assigner import YOLOAssigner, YOLOTargets, batched_box_iou, ignore_mask, wh_iou

__all__ = [
    "AnchorGenerator",
    "AssignResult",
    "DeltaXYWHBBoxCoder",
    "MaxIoUAssigner",
    "PseudoSampler",
    "RandomSampler",
    "SamplingResult",
    "YOLOAssigner",
    "YOLOTargets",
    "batched_box_iou",
    "box_iof",
    "ignore_mask",
    "multiclass_nms",
    "wh_iou",
]
