"""Detection losses."""

from .focal_loss import FocalLoss
from .iou_loss import GIoULoss
from .rcnn_losses import CrossEntropyLoss, L1Loss, SmoothL1Loss, reduce_loss
from .yolo_losses import bce_with_logits, class_targets, l1_sum, weighted_giou_loss

__all__ = [
    "CrossEntropyLoss",
    "FocalLoss",
    "GIoULoss",
    "L1Loss",
    "SmoothL1Loss",
    "bce_with_logits",
    "class_targets",
    "l1_sum",
    "reduce_loss",
    "weighted_giou_loss",
]
