"""Small loss helpers of YOLO-style heads: smoothed class targets and a weighted GIoU loss."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torchvision.ops import generalized_box_iou_loss


def class_targets(labels: Tensor, num_classes: int, label_smooth: bool = False) -> Tensor:
    """One-hot float targets [P, C]; with ``label_smooth`` the positive is ``1 - d`` and the others ``d``,
    ``d = min(1 / C, 1 / 40)`` (PaddleDetection's YOLOv3 loss)."""
    target = F.one_hot(labels.long(), num_classes).float()
    if label_smooth:
        delta = min(1.0 / num_classes, 1.0 / 40)
        target = target * (1.0 - 2.0 * delta) + delta
    return target


def weighted_giou_loss(pred: Tensor, target: Tensor, weight: Tensor | None = None) -> Tensor:
    """Sum over boxes of ``weight * (1 - GIoU)`` for xyxy [P, 4] boxes (zero, still differentiable, for P = 0)."""
    if pred.numel() == 0:
        return pred.sum() * 0.0
    loss = generalized_box_iou_loss(pred.float(), target.float(), reduction="none")
    if weight is not None:
        loss = loss * weight
    return loss.sum()


def bce_with_logits(logits: Tensor, target: Tensor, weight: Tensor | None = None) -> Tensor:
    """Summed binary cross-entropy on logits, optionally weighted element-wise."""
    loss = F.binary_cross_entropy_with_logits(logits, target, reduction="none")
    if weight is not None:
        loss = loss * weight
    return loss.sum()


def l1_sum(pred: Tensor, target: Tensor, weight: Tensor | None = None) -> Tensor:
    """Summed absolute error, optionally weighted element-wise."""
    loss = torch.abs(pred - target)
    if weight is not None:
        loss = loss * weight
    return loss.sum()
