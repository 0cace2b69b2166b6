"""Classification losses of the recognizers: softmax cross-entropy (single label) and sigmoid BCE (multi-label)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from video.registry import MODELS


def _check_name(owner: str, loss_name: str) -> str:
    if "loss" not in loss_name:
        raise ValueError(f"{owner}: loss_name={loss_name!r} must contain 'loss' so mmengine sums it into the total")
    return loss_name


def _class_weight(owner: str, weight: torch.Tensor | None, num_classes: int, dtype: torch.dtype) -> torch.Tensor | None:
    if weight is None:
        return None
    if weight.numel() != num_classes:
        raise ValueError(f"{owner}: class_weight has {weight.numel()} values but the scores have {num_classes} classes")
    return weight.to(dtype)


@MODELS.register_module()
class CrossEntropyLoss(nn.Module):
    """Softmax cross-entropy over classes, optionally with label smoothing (Szegedy et al. 2016).

    Args:
        loss_weight: multiplies the loss.
        class_weight: one weight per class (``F.cross_entropy``'s ``weight``), or None.
        label_smoothing: in [0, 1): the target puts ``1 - eps + eps / C`` on the true class, ``eps / C`` elsewhere.
        loss_name: the log key (must contain ``loss``).

    ``forward(scores, labels)``: float [N, C] logits, long [N] class ids -> scalar (mean over N).
    """

    def __init__(self, loss_weight: float = 1.0, class_weight: Sequence[float] | None = None,
                 label_smoothing: float = 0.0, loss_name: str = "loss_cls") -> None:
        super().__init__()
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"CrossEntropyLoss: label_smoothing must be in [0, 1), got {label_smoothing!r}")
        self.loss_weight = float(loss_weight)
        self.label_smoothing = float(label_smoothing)
        self.loss_name = _check_name("CrossEntropyLoss", loss_name)
        weight = None if class_weight is None else torch.as_tensor(class_weight, dtype=torch.float32)
        self.register_buffer("class_weight", weight, persistent=False)

    def forward(self, scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if labels.dim() != 1 or labels.dtype.is_floating_point:
            raise ValueError(f"CrossEntropyLoss: labels must be class ids, long [N], got {labels.dtype} "
                             f"{tuple(labels.shape)} (multi-hot labels need BCELossWithLogits and multi_label: true)")
        weight = _class_weight("CrossEntropyLoss", self.class_weight, scores.shape[1], scores.dtype)
        loss = F.cross_entropy(scores, labels, weight=weight, label_smoothing=self.label_smoothing)
        return self.loss_weight * loss

    def extra_repr(self) -> str:
        return f"loss_weight={self.loss_weight}, label_smoothing={self.label_smoothing}, loss_name={self.loss_name!r}"


@MODELS.register_module()
class BCELossWithLogits(nn.Module):
    """Per-class sigmoid binary cross-entropy for multi-label recognition (each class present or not).

    Args:
        loss_weight: multiplies the loss.
        class_weight: one weight per class (multiplies each class's term), or None.
        loss_name: the log key (must contain ``loss``).

    ``forward(scores, labels)``: float [N, C] logits, float [N, C] multi-hot targets in [0, 1] -> scalar (mean over
    N and C, as ``F.binary_cross_entropy_with_logits``).
    """

    def __init__(self, loss_weight: float = 1.0, class_weight: Sequence[float] | None = None,
                 loss_name: str = "loss_cls") -> None:
        super().__init__()
        self.loss_weight = float(loss_weight)
        self.loss_name = _check_name("BCELossWithLogits", loss_name)
        weight = None if class_weight is None else torch.as_tensor(class_weight, dtype=torch.float32)
        self.register_buffer("class_weight", weight, persistent=False)

    def forward(self, scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if labels.shape != scores.shape:
            raise ValueError(f"BCELossWithLogits: labels must be multi-hot [N, C] like the scores "
                             f"{tuple(scores.shape)}, got {tuple(labels.shape)}")
        weight = _class_weight("BCELossWithLogits", self.class_weight, scores.shape[1], scores.dtype)
        loss = F.binary_cross_entropy_with_logits(scores, labels.to(scores.dtype), weight=weight)
        return self.loss_weight * loss

    def extra_repr(self) -> str:
        return f"loss_weight={self.loss_weight}, loss_name={self.loss_name!r}"
