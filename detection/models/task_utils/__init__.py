"""Target assignment and post-processing shared by detection heads."""

from .postprocess import multiclass_nms
from .yolo_assigner import YOLOAssigner, YOLOTargets, batched_box_iou, ignore_mask, wh_iou

__all__ = ["YOLOAssigner", "YOLOTargets", "batched_box_iou", "ignore_mask", "multiclass_nms", "wh_iou"]
