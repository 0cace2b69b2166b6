"""Pixel-wise cross-entropy for semantic segmentation."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from segmentation.registry import MODELS


@MODELS.register_module()
class CrossEntropyLoss(nn.Module):
    """Softmax cross-entropy over classes, ignoring pixels labelled ``ignore_index``.

    ``avg_non_ignore=True`` averages over the pixels that are not ignored (weighted by ``class_weight``
    when given: exactly ``F.cross_entropy(..., reduction='mean')``); ``False`` averages over every
    pixel, so ignored ones count as zero loss (mmseg's old default, which shrinks the loss on images
    with large ignored areas). A batch with every pixel ignored gives a zero loss, not NaN.
    """

    def __init__(
        self,
        loss_weight: float = 1.0,
        class_weight: Sequence[float] | None = None,
        avg_non_ignore: bool = True,
        loss_name: str = "loss_ce",
    ) -> None:
        super().__init__()
        if "loss" not in loss_name:
            raise ValueError(
                f"CrossEntropyLoss loss_name={loss_name!r} must contain 'loss' so mmengine sums it into the total"
            )
        self.loss_weight = float(loss_weight)
        self.avg_non_ignore = avg_non_ignore
        self.loss_name = loss_name
        weight = None if class_weight is None else torch.as_tensor(class_weight, dtype=torch.float32)
        self.register_buffer("class_weight", weight, persistent=False)

    def forward(self, logits: torch.Tensor, target: torch.Tensor, ignore_index: int = 255) -> torch.Tensor:
        """``logits`` [B, C, H, W], ``target`` [B, H, W] class ids -> weighted scalar loss."""
        num_classes = logits.shape[1]
        weight = self.class_weight
        if weight is not None:
            if weight.numel() != num_classes:
                raise ValueError(
                    f"CrossEntropyLoss class_weight has {weight.numel()} values but the logits have "
                    f"{num_classes} classes"
                )
            weight = weight.to(logits.dtype)
        target = target.long()
        pixel_loss = F.cross_entropy(logits, target, weight=weight, ignore_index=ignore_index, reduction="none")
        valid = target != ignore_index
        if self.avg_non_ignore:
            if weight is None:
                denom = valid.sum()
            else:
                denom = weight[target.clamp(0, num_classes - 1)].mul(valid).sum()
        else:
            denom = torch.tensor(float(target.numel()), device=logits.device)
        loss = pixel_loss.sum() / denom.clamp(min=1e-12).to(pixel_loss.dtype)
        return self.loss_weight * loss

    def extra_repr(self) -> str:
        return f"loss_weight={self.loss_weight}, avg_non_ignore={self.avg_non_ignore}, loss_name={self.loss_name!r}"
