"""Multi-class (softmax) focal loss (Lin et al., ICCV 2017) for semantic segmentation."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from segmentation.registry import MODELS

from .utils import (
    check_logits_target,
    check_loss_name,
    check_loss_weight,
    class_weight_tensor,
    safe_target,
    sum_ratio,
)


@MODELS.register_module()
class FocalLoss(nn.Module):
    """``-alpha_t * (1 - p_t)^gamma * log(p_t)`` per valid pixel, averaged over the valid pixels.

    ``p_t`` is the softmax probability of the pixel's true class. Why: the ``(1 - p_t)^gamma`` factor shrinks
    the loss of pixels the model already gets right, so the many easy background pixels stop dominating;
    ``gamma=0`` and no ``alpha`` is exactly cross-entropy. With two classes and ``alpha=[1 - a, a]`` it equals
    torchvision's ``sigmoid_focal_loss(l1 - l0, target, alpha=a, gamma)`` (softmax of two logits is the
    sigmoid of their difference).

    Args:
        gamma: focusing exponent (>= 0; 2 in the paper).
        alpha: per-class weights [C] (``alpha_t = alpha[target]``), one number (a plain factor on every pixel),
            or None (1).
        loss_weight: factor on the loss; loss_name: its key in the log (must contain 'loss').

    The mean is over valid pixels, not weighted by ``alpha`` (as in the paper and torchvision), so ``alpha``
    changes the balance between classes and also the scale of the loss. No valid pixel: a zero loss.
    """

    def __init__(
        self,
        gamma: float = 2.0,
        alpha: float | Sequence[float] | None = None,
        loss_weight: float = 1.0,
        loss_name: str = "loss_focal",
    ) -> None:
        super().__init__()
        self.loss_name = check_loss_name("FocalLoss", loss_name)
        self.loss_weight = check_loss_weight("FocalLoss", loss_weight)
        if float(gamma) < 0:
            raise ValueError(f"FocalLoss gamma must be >= 0, got {gamma}")
        self.gamma = float(gamma)
        self.scalar_alpha: float | None = None
        per_class = None
        if isinstance(alpha, int | float):
            if alpha < 0:
                raise ValueError(f"FocalLoss alpha must be >= 0, got {alpha}")
            self.scalar_alpha = float(alpha)
        elif alpha is not None:
            per_class = class_weight_tensor("FocalLoss", alpha, key="alpha")
        self.register_buffer("alpha", per_class, persistent=False)

    def forward(self, logits: torch.Tensor, target: torch.Tensor, ignore_index: int = 255) -> torch.Tensor:
        """``logits`` [B, C, H, W] float, ``target`` [B, H, W] class ids -> weighted scalar loss."""
        check_logits_target("FocalLoss", logits, target)
        num_classes = logits.shape[1]
        safe, valid = safe_target(target, ignore_index, num_classes)
        log_prob = logits.log_softmax(dim=1, dtype=torch.promote_types(logits.dtype, torch.float32))
        log_pt = log_prob.gather(1, safe.unsqueeze(1)).squeeze(1)  # [B, H, W]
        # 1 - p_t as -expm1(log p_t): exact for confident pixels; the floor keeps the gradient of (1 - p_t)^gamma
        # finite for gamma < 1 where p_t rounds to 1.
        modulator = (-torch.expm1(log_pt)).clamp(min=1e-12).pow(self.gamma)
        loss = -modulator * log_pt
        if self.alpha is not None:
            if self.alpha.numel() != num_classes:
                raise ValueError(f"FocalLoss alpha has {self.alpha.numel()} values but the logits have "
                                 f"{num_classes} classes")
            loss = loss * self.alpha.to(loss.dtype)[safe]
        elif self.scalar_alpha is not None:
            loss = loss * self.scalar_alpha
        valid = valid.to(loss.dtype)
        return self.loss_weight * sum_ratio(loss * valid, valid)

    def extra_repr(self) -> str:
        alpha = self.scalar_alpha if self.alpha is None else self.alpha.tolist()
        return f"gamma={self.gamma}, alpha={alpha}, loss_weight={self.loss_weight}, loss_name={self.loss_name!r}"
