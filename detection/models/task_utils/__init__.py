"""Target assignment, sampling, box coding, anchors and post-processing shared by detection heads.

The classes a config swaps are registered in ``detection.registry.TASK_UTILS`` (MMDetection's habit).
"""

from .anchor_generator import AnchorGenerator
from .bbox_coder import DeltaXYWHBBoxCoder
from .fcos_assigner import FCOSAssigner
from .hard_negative_mining import hard_negative_mask
from .max_iou_assigner import AssignResult, MaxIoUAssigner, box_iof
from .postprocess import multiclass_nms
from .samplers import PseudoSampler, RandomSampler, SamplingResult
from .ssd_prior_generator import SSDPriorGenerator
from .yolo_assigner import YOLOAssigner, YOLOTargets, batched_box_iou, ignore_mask, wh_iou

__all__ = [
    "AnchorGenerator",
    "AssignResult",
    "DeltaXYWHBBoxCoder",
    "FCOSAssigner",
    "MaxIoUAssigner",
    "PseudoSampler",
    "RandomSampler",
    "SSDPriorGenerator",
    "SamplingResult",
    "YOLOAssigner",
    "YOLOTargets",
    "batched_box_iou",
    "box_iof",
    "hard_negative_mask",
    "ignore_mask",
    "multiclass_nms",
    "wh_iou",
]
