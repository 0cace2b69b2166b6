"""Losses of the anchor / R-CNN heads, registered so that a config swaps them (``loss_cls``, ``loss_bbox``).

Every loss takes ``(pred, target, weight=None, avg_factor=None)``, computes in float32 (autocast-safe) and
reduces by ``reduction``: ``'mean'`` divides the (weighted) sum by ``avg_factor`` when it is given (the number
of sampled priors, as MMDetection normalises) or by the element count; ``'sum'``; ``'none'``. An empty input
gives a zero that still has a gradient, never NaN (an image without boxes has no positives).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from detection.registry import MODELS

_REDUCTIONS = ("mean", "sum", "none")


def reduce_loss(loss: Tensor, weight: Tensor | None, reduction: str, avg_factor: float | Tensor | None) -> Tensor:
    """Weight ``loss`` element-wise (``weight`` broadcast to it) and reduce it (see the module docstring)."""
    if weight is not None:
        weight = weight.float()
        while weight.dim() < loss.dim():
            weight = weight.unsqueeze(-1)
        loss = loss * weight
    if reduction == "none":
        return loss
    if loss.numel() == 0:
        return loss.sum() * 0.0
    if reduction == "sum":
        return loss.sum()
    if avg_factor is None:
        return loss.mean()
    return loss.sum() / torch.as_tensor(avg_factor, dtype=loss.dtype, device=loss.device).clamp(min=1e-6)


class _Loss(nn.Module):
    def __init__(self, loss_weight: float = 1.0, reduction: str = "mean") -> None:
        super().__init__()
        if reduction not in _REDUCTIONS:
            raise ValueError(f"{type(self).__name__}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")
        self.loss_weight = float(loss_weight)
        self.reduction = reduction

    def elementwise(self, pred: Tensor, target: Tensor) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def forward(self, pred: Tensor, target: Tensor, weight: Tensor | None = None,
                avg_factor: float | Tensor | None = None) -> Tensor:
        """``loss_weight`` times the reduced element-wise loss of ``pred`` against ``target``."""
        with torch.autocast(pred.device.type, enabled=False):
            loss = self.elementwise(pred.float(), target)
            return self.loss_weight * reduce_loss(loss, weight, self.reduction, avg_factor)


@MODELS.register_module()
class CrossEntropyLoss(_Loss):
    """Softmax cross-entropy over ``pred [N, C]`` with int64 ``target [N]``; or, with ``use_sigmoid``, binary
    cross-entropy on logits: ``target`` the shape of ``pred`` (0/1 floats), or int64 labels ``[N]`` for
    ``pred [N, C]``, one-hot encoded, a label ``>= C`` meaning background (an all-zero row).

    Args:
        use_sigmoid: binary (per-class sigmoid) instead of softmax.
        class_weight: per-class weights ``[C]`` of the softmax form (None: equal).
        loss_weight, reduction: see the module docstring.
    """

    def __init__(self, use_sigmoid: bool = False, class_weight: list[float] | None = None, loss_weight: float = 1.0,
                 reduction: str = "mean") -> None:
        super().__init__(loss_weight, reduction)
        self.use_sigmoid = use_sigmoid
        self.class_weight = None if class_weight is None else [float(w) for w in class_weight]

    def elementwise(self, pred: Tensor, target: Tensor) -> Tensor:
        if self.use_sigmoid:
            if target.dtype in (torch.int64, torch.int32) and pred.dim() == 2 and target.dim() == 1:
                c = pred.shape[1]
                target = F.one_hot(target.long().clamp(max=c), c + 1)[:, :c]
            return F.binary_cross_entropy_with_logits(pred, target.float(), reduction="none")
        if pred.dim() != 2 or target.dim() != 1:
            raise ValueError(f"CrossEntropyLoss: expected pred [N, C] and target [N], got {tuple(pred.shape)} and "
                             f"{tuple(target.shape)}")
        weight = None if self.class_weight is None else pred.new_tensor(self.class_weight)
        return F.cross_entropy(pred, target.long(), weight=weight, reduction="none")


@MODELS.register_module()
class L1Loss(_Loss):
    """Absolute error ``|pred - target|`` per element (box deltas of the R-CNN heads)."""

    def elementwise(self, pred: Tensor, target: Tensor) -> Tensor:
        return (pred - target.float()).abs()


@MODELS.register_module()
class SmoothL1Loss(_Loss):
    """Huber-like error: ``0.5 x^2 / beta`` below ``beta``, ``|x| - 0.5 beta`` above (torchvision's R-CNN uses
    beta = 1/9)."""

    def __init__(self, beta: float = 1.0, loss_weight: float = 1.0, reduction: str = "mean") -> None:
        super().__init__(loss_weight, reduction)
        if beta < 0:
            raise ValueError(f"SmoothL1Loss: beta must be >= 0, got {beta!r}")
        self.beta = float(beta)

    def elementwise(self, pred: Tensor, target: Tensor) -> Tensor:
        return F.smooth_l1_loss(pred, target.float(), beta=self.beta, reduction="none")
