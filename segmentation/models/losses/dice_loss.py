"""Soft Dice loss: robust to class imbalance (small foreground objects)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from segmentation.registry import MODELS

from .utils import check_loss_name, check_loss_weight


@MODELS.register_module()
class DiceLoss(nn.Module):
    """``1 - (2 * sum(p * t) + smooth) / (sum(p^e) + sum(t^e) + smooth)`` per image and class, averaged.

    ``p`` is the softmax probability, ``t`` the one-hot target, ``e`` the ``exponent``; sums run over the
    pixels not labelled ``ignore_index`` (as mmsegmentation's ``DiceLoss``).
    """

    def __init__(
        self, loss_weight: float = 1.0, smooth: float = 1.0, exponent: float = 2, loss_name: str = "loss_dice"
    ) -> None:
        super().__init__()
        self.loss_name = check_loss_name("DiceLoss", loss_name)
        self.loss_weight = check_loss_weight("DiceLoss", loss_weight)
        self.smooth = float(smooth)
        self.exponent = exponent

    def forward(self, logits: torch.Tensor, target: torch.Tensor, ignore_index: int = 255) -> torch.Tensor:
        """``logits`` [B, C, H, W], ``target`` [B, H, W] class ids -> weighted scalar loss."""
        num_classes = logits.shape[1]
        target = target.long()
        valid = (target != ignore_index).unsqueeze(1).to(logits.dtype)  # [B, 1, H, W]
        prob = logits.softmax(dim=1) * valid
        one_hot = F.one_hot(target.clamp(0, num_classes - 1), num_classes).permute(0, 3, 1, 2).to(logits.dtype)
        one_hot = one_hot * valid
        inter = (prob * one_hot).flatten(2).sum(-1)  # [B, C]
        denom = prob.pow(self.exponent).flatten(2).sum(-1) + one_hot.pow(self.exponent).flatten(2).sum(-1)
        dice = (2 * inter + self.smooth) / (denom + self.smooth)
        return self.loss_weight * (1 - dice).mean()

    def extra_repr(self) -> str:
        return f"loss_weight={self.loss_weight}, smooth={self.smooth}, exponent={self.exponent}"
