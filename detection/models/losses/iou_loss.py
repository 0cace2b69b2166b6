"""Generalised-IoU box loss (Rezatofighi et al. 2019) as a registered loss: ``torchvision.ops``'s op."""

from __future__ import annotations

from torch import Tensor
from torchvision.ops import generalized_box_iou_loss

from detection.registry import MODELS

from .rcnn_losses import _Loss


@MODELS.register_module()
class GIoULoss(_Loss):
    """``1 - GIoU(pred, target)`` per box pair.

    ``forward(pred, target, weight=None, avg_factor=None)``: ``pred``, ``target`` float ``[N, 4]`` xyxy boxes (a
    head decodes its deltas first: ``decodes_boxes`` is True), ``weight`` ``[N]``. Returns a float32 scalar
    (``[N]`` with ``reduction='none'``); 0 with a gradient for N = 0.

    Args:
        eps: torchvision's guard against empty unions.
        loss_weight, reduction: see :mod:`detection.models.losses.rcnn_losses`.
    """

    decodes_boxes = True  # the loss compares boxes, not regression targets

    def __init__(self, eps: float = 1e-7, loss_weight: float = 1.0, reduction: str = "mean") -> None:
        super().__init__(loss_weight, reduction)
        self.eps = float(eps)

    def elementwise(self, pred: Tensor, target: Tensor) -> Tensor:
        return generalized_box_iou_loss(pred, target.to(pred.dtype), reduction="none", eps=self.eps)
