"""Detection losses."""

from .yolo_losses import bce_with_logits, class_targets, l1_sum, weighted_giou_loss

__all__ = ["bce_with_logits", "class_targets", "l1_sum", "weighted_giou_loss"]
