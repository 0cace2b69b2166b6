"""Pixel-wise cross-entropy for semantic segmentation."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from segmentation.registry import MODELS

from .utils import check_loss_name, check_loss_weight, class_weight_tensor, match_class_weight, sum_ratio


def pixel_cross_entropy(
    logits: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None, ignore_index: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-pixel cross-entropy and the weight each pixel carries in a weighted mean.

    ``logits`` [B, C, H, W] float, ``target`` [B, H, W] int64, ``weight`` [C] or None. Returns
    (loss [B, H, W], already multiplied by ``weight[target]``; pixel weight [B, H, W]: ``weight[target]``, or
    1, and 0 on ignored pixels). ``loss.sum() / pixel_weight.sum()`` is ``F.cross_entropy(..., reduction='mean')``.
    """
    pixel_loss = F.cross_entropy(logits, target, weight=weight, ignore_index=ignore_index, reduction="none")
    valid = target != ignore_index
    if weight is None:
        return pixel_loss, valid.to(pixel_loss.dtype)
    return pixel_loss, weight[target.masked_fill(~valid, 0)] * valid


@MODELS.register_module()
class CrossEntropyLoss(nn.Module):
    """Softmax cross-entropy over classes, ignoring pixels labelled ``ignore_index``.

    ``avg_non_ignore=True`` averages over the pixels that are not ignored (weighted by ``class_weight``
    when given: exactly ``F.cross_entropy(..., reduction='mean')``); ``False`` averages over every
    pixel, so ignored ones count as zero loss (mmseg's old default, which shrinks the loss on images
    with large ignored areas). A batch with every pixel ignored gives a zero loss, not NaN.
    ``tools/class_weights.py`` computes median-frequency ``class_weight`` values from the training labels.
    """

    def __init__(
        self,
        loss_weight: float = 1.0,
        class_weight: Sequence[float] | None = None,
        avg_non_ignore: bool = True,
        loss_name: str = "loss_ce",
    ) -> None:
        super().__init__()
        self.loss_name = check_loss_name("CrossEntropyLoss", loss_name)
        self.loss_weight = check_loss_weight("CrossEntropyLoss", loss_weight)
        self.avg_non_ignore = avg_non_ignore
        self.register_buffer("class_weight", class_weight_tensor("CrossEntropyLoss", class_weight), persistent=False)

    def forward(self, logits: torch.Tensor, target: torch.Tensor, ignore_index: int = 255) -> torch.Tensor:
        """``logits`` [B, C, H, W], ``target`` [B, H, W] class ids -> weighted scalar loss."""
        weight = match_class_weight("CrossEntropyLoss", self.class_weight, logits)
        pixel_loss, pixel_weight = pixel_cross_entropy(logits, target.long(), weight, ignore_index)
        denom = pixel_weight if self.avg_non_ignore else float(target.numel())
        return self.loss_weight * sum_ratio(pixel_loss, denom)

    def extra_repr(self) -> str:
        return f"loss_weight={self.loss_weight}, avg_non_ignore={self.avg_non_ignore}, loss_name={self.loss_name!r}"
