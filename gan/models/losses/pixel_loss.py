"""Pixel losses of image-to-image translation (pix2pix's L1 term, CycleGAN's cycle and identity terms)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from gan.registry import MODELS

REDUCTIONS = ("mean", "sum")


@MODELS.register_module()
class L1Loss(nn.Module):
    """``loss_weight * |pred - target|`` averaged (``mean``) or summed over every element; float32 scalar.

    pix2pix: ``loss_weight: 100`` (lambda_L1); CycleGAN: cycle ``10`` (lambda_A/B), identity ``0.5 * 10 = 5``.
    """

    def __init__(self, loss_weight: float = 1.0, reduction: str = "mean") -> None:
        super().__init__()
        if reduction not in REDUCTIONS:
            raise ValueError(f"L1Loss.reduction: expected one of {list(REDUCTIONS)}, got {reduction!r}")
        self.loss_weight = float(loss_weight)
        self.reduction = reduction

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if pred.shape != target.shape:
            raise ValueError(f"L1Loss: pred {tuple(pred.shape)} and target {tuple(target.shape)} differ in shape")
        return F.l1_loss(pred.float(), target.float(), reduction=self.reduction) * self.loss_weight
