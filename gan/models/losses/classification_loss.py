"""Attribute classification loss of attribute-editing GANs (StarGAN, AttGAN, STGAN)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from gan.registry import MODELS


@MODELS.register_module()
class ClassificationLoss(nn.Module):
    """Binary cross-entropy with logits over K attributes, summed over the attributes and averaged over the batch
    (StarGAN's ``BCE(sum) / B``), times ``loss_weight``.

    ``logits``: [B, K] float; ``targets``: [B, K] 0/1 (float). Returns a float32 scalar.
    """

    def __init__(self, loss_weight: float = 1.0) -> None:
        super().__init__()
        self.loss_weight = float(loss_weight)

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        if logits.shape != targets.shape or logits.dim() != 2:
            raise ValueError(f"ClassificationLoss: logits {tuple(logits.shape)} and targets {tuple(targets.shape)} "
                             "must both be [B, K]")
        loss = F.binary_cross_entropy_with_logits(logits.float(), targets.float(), reduction="sum")
        return loss / logits.shape[0] * self.loss_weight
