"""Class-balanced 2-class cross-entropy for edge maps (CE2P / SCHP's edge loss)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from segmentation.registry import MODELS

from .utils import check_logits_target, check_loss_name, check_loss_weight, sum_ratio


def edge_class_weights(target: torch.Tensor, ignore_index: int = 255) -> torch.Tensor:
    """SCHP's per-batch weights [w_non_edge, w_edge] = [pos / (pos + neg), neg / (pos + neg)] (float32 [2]):
    ``pos`` / ``neg`` count the edge / non-edge pixels of the batch, ignored ones left out. Edges are a few
    percent of the pixels, so each class ends up carrying the same total weight. A batch without valid pixels
    gets [0, 0] (the loss is then 0, as for an all-ignored batch)."""
    valid = target != ignore_index
    pos = (target == 1).logical_and(valid).sum().float()
    neg = (target == 0).logical_and(valid).sum().float()
    total = (pos + neg).clamp(min=1.0)
    return torch.stack([pos / total, neg / total])


@MODELS.register_module()
class EdgeCrossEntropyLoss(nn.Module):
    """Cross-entropy of 2-class edge logits against 0 (non-edge) / 1 (edge) / ``ignore_index`` targets, weighted
    per batch by :func:`edge_class_weights` (the weighted mean of ``F.cross_entropy(weight=...)``).

    Why balanced: about 5-10 % of a parsing label map lies on a 3-px boundary band, so an unweighted CE is
    minimised by predicting "no edge" everywhere. A batch whose valid pixels are all of one class (no edge at all)
    gives that class weight 0: the loss is 0 rather than NaN.

    Args:
        loss_weight: factor on the loss (SCHP's ``lambda_2``, 1).
        loss_name: its key in the log (must contain 'loss').
    """

    def __init__(self, loss_weight: float = 1.0, loss_name: str = "loss_edge") -> None:
        super().__init__()
        self.loss_name = check_loss_name("EdgeCrossEntropyLoss", loss_name)
        self.loss_weight = check_loss_weight("EdgeCrossEntropyLoss", loss_weight)

    def forward(self, logits: torch.Tensor, target: torch.Tensor, ignore_index: int = 255) -> torch.Tensor:
        """``logits`` [B, 2, H, W], ``target`` [B, H, W] (0 / 1 / ignore) -> weighted scalar loss."""
        check_logits_target("EdgeCrossEntropyLoss", logits, target)
        if logits.shape[1] != 2:
            raise ValueError(f"EdgeCrossEntropyLoss expects 2-class edge logits [B, 2, H, W], got "
                             f"{tuple(logits.shape)}")
        target = target.long()
        valid = target != ignore_index
        bad = valid & (target > 1)
        if bool(bad.any()):
            raise ValueError(f"EdgeCrossEntropyLoss: edge targets must be 0, 1 or ignore_index {ignore_index}, got "
                             f"{sorted(set(target[bad].unique().tolist()))[:10]}")
        weight = edge_class_weights(target, ignore_index).to(logits.device)
        pixel = F.cross_entropy(logits.float(), target, ignore_index=ignore_index, reduction="none")
        pixel_weight = weight[target.masked_fill(~valid, 0)] * valid
        return self.loss_weight * sum_ratio(pixel * pixel_weight, pixel_weight)

    def extra_repr(self) -> str:
        return f"loss_weight={self.loss_weight}, loss_name={self.loss_name!r}"
