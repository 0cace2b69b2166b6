"""Distillation losses (registered in the core MODELS registry; a config lists several, each on its own layers).

Each takes ``(student, teacher)`` feature tensors of one layer pair and returns a scalar. A pair whose shapes the
loss cannot relate is one :class:`DistillShapeError` naming both shapes and the layers (set by the wrapper).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from oars.errors import OarsError
from oars.registry import MODELS


class DistillShapeError(OarsError):
    """Student and teacher outputs that a distillation loss cannot compare."""


def _same_shape(loss: str, student: torch.Tensor, teacher: torch.Tensor, what: str = "") -> None:
    if student.shape != teacher.shape:
        raise DistillShapeError(f"{loss}: the student's output has shape {list(student.shape)} but the teacher's "
                                f"{list(teacher.shape)}{what}")


@MODELS.register_module()
class LogitKDLoss(nn.Module):
    """Hinton et al. 2015: ``T^2 * KL(softmax(t / T) || softmax(s / T))`` over the class axis (1), averaged over
    every other position (samples, pixels); the ``T^2`` keeps its gradients on the scale of the task loss.

    Args:
        temperature: T > 0 (higher: softer targets, more of the teacher's "dark knowledge").

    Shapes: student and teacher ``[N, C, *]`` float logits, the same shape. Returns a 0-d tensor.
    """

    def __init__(self, temperature: float = 4.0) -> None:
        super().__init__()
        if not temperature > 0:
            raise OarsError(f"LogitKDLoss: temperature must be > 0, got {temperature!r}")
        self.temperature = float(temperature)

    def forward(self, student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
        _same_shape("LogitKDLoss", student, teacher)
        t = self.temperature
        log_p_s = F.log_softmax(student / t, dim=1)
        log_p_t = F.log_softmax(teacher / t, dim=1)
        kl = (log_p_t.exp() * (log_p_t - log_p_s)).sum(dim=1)  # [N, *]
        return kl.mean() * t * t


@MODELS.register_module()
class FeatureImitationLoss(nn.Module):
    """FitNets-style imitation: ``mean((adapter(s) - t)^2)``; the adapter is a learned 1x1 convolution from the
    student's width to the teacher's when they differ (identity otherwise), trained with the student and left
    out of its exported model.

    Args:
        student_channels: C_s of the student feature (filled in by the wrapper from a dry run).
        teacher_channels: C_t of the teacher feature.

    Shapes: student ``[N, C_s, H, W]``, teacher ``[N, C_t, H, W]`` (same N, H, W). Returns a 0-d tensor.
    """

    def __init__(self, student_channels: int | None = None, teacher_channels: int | None = None) -> None:
        super().__init__()
        widths_differ = student_channels is not None and teacher_channels is not None and \
            student_channels != teacher_channels
        self.adapter = nn.Conv2d(student_channels, teacher_channels, 1) if widths_differ else nn.Identity()

    def forward(self, student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
        if student.dim() != teacher.dim() or student.shape[0] != teacher.shape[0] or \
                student.shape[2:] != teacher.shape[2:]:
            raise DistillShapeError(f"FeatureImitationLoss: the student's output has shape {list(student.shape)} "
                                    f"but the teacher's {list(teacher.shape)} (batch and spatial sizes must match)")
        adapted = self.adapter(student)
        _same_shape("FeatureImitationLoss", adapted, teacher, " after the 1x1 adapter (give student_channels and "
                    "teacher_channels)")
        return F.mse_loss(adapted, teacher)


@MODELS.register_module()
class ChannelWiseDistillLoss(nn.Module):
    """Channel-wise distillation for dense prediction (Shu et al. 2021, "Channel-wise Knowledge Distillation for
    Dense Prediction"): each channel's map becomes a distribution over its H*W positions (softmax with temperature
    T), and the student's matches the teacher's in KL, ``T^2 / C * sum_c KL(p_t^c || p_s^c)``, averaged over the
    batch. Where a channel puts its mass matters, not its absolute activations.

    Args:
        temperature: T > 0.

    Shapes: student and teacher ``[N, C, H, W]`` (same shape). Returns a 0-d tensor.
    """

    def __init__(self, temperature: float = 4.0) -> None:
        super().__init__()
        if not temperature > 0:
            raise OarsError(f"ChannelWiseDistillLoss: temperature must be > 0, got {temperature!r}")
        self.temperature = float(temperature)

    def forward(self, student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
        _same_shape("ChannelWiseDistillLoss", student, teacher)
        t = self.temperature
        n, c = student.shape[:2]
        log_p_s = F.log_softmax(student.reshape(n, c, -1) / t, dim=2)
        log_p_t = F.log_softmax(teacher.reshape(n, c, -1) / t, dim=2)
        kl = (log_p_t.exp() * (log_p_t - log_p_s)).sum(dim=2)  # [N, C]
        return kl.sum(dim=1).mean() * t * t / c
