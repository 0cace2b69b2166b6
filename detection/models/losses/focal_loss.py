"""Sigmoid focal loss (Lin et al. 2017, RetinaNet) as a registered loss: ``torchvision.ops.sigmoid_focal_loss``."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torchvision.ops import sigmoid_focal_loss

from detection.registry import MODELS

from .rcnn_losses import _Loss


@MODELS.register_module()
class FocalLoss(_Loss):
    """``-alpha_t (1 - p_t)^gamma log(p_t)`` per (prior, class), on logits, via torchvision's op.

    Args:
        alpha: weight of the positives (``1 - alpha`` for the negatives); < 0 disables it.
        gamma: focusing exponent (0: plain binary cross-entropy).
        loss_weight, reduction: see :mod:`detection.models.losses.rcnn_losses` (RetinaNet / FCOS sum and divide
            by the number of positives: ``reduction='mean'`` with ``avg_factor``).

    ``forward(pred, target, weight=None, avg_factor=None)``: ``pred`` float ``[N, C]`` logits; ``target`` float 0/1
    ``[N, C]``, or int64 labels ``[N]`` where a label ``>= C`` (or < 0) is background (an all-zero row);
    ``weight`` ``[N]`` or ``[N, C]``. Returns a float32 scalar (``[N, C]`` with ``reduction='none'``).
    """

    def __init__(self, alpha: float = 0.25, gamma: float = 2.0, loss_weight: float = 1.0,
                 reduction: str = "mean") -> None:
        super().__init__(loss_weight, reduction)
        if gamma < 0:
            raise ValueError(f"FocalLoss: gamma must be >= 0, got {gamma!r}")
        self.alpha = float(alpha)
        self.gamma = float(gamma)

    def elementwise(self, pred: Tensor, target: Tensor) -> Tensor:
        if target.dtype in (torch.int64, torch.int32) and target.dim() == pred.dim() - 1:
            c = pred.shape[-1]
            labels = target.long()
            labels = torch.where((labels < 0) | (labels >= c), torch.full_like(labels, c), labels)
            target = F.one_hot(labels, c + 1)[..., :c]
        return sigmoid_focal_loss(pred, target.to(pred.dtype), alpha=self.alpha, gamma=self.gamma, reduction="none")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(alpha={self.alpha}, gamma={self.gamma}, loss_weight={self.loss_weight})"
