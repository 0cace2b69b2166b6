"""WGAN-GP's gradient penalty (Gulrajani et al. 2017): the critic's gradient norm pulled to 1 between real and fake."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from gan.registry import MODELS


def gradient_penalty(critic: Callable[[torch.Tensor], torch.Tensor], real: torch.Tensor, fake: torch.Tensor,
                     alpha: torch.Tensor | None = None) -> torch.Tensor:
    """``mean_b (||d critic(x_b) / d x_b||_2 - 1)^2`` at ``x = alpha * real + (1 - alpha) * fake``.

    Args:
        critic: maps [B, ...] -> [B, ...] (summed per sample: a PatchGAN's map counts as one score).
        real, fake: [B, C, H, W] (fake is detached here).
        alpha: [B] interpolation weights; default U(0, 1) from torch's generator.

    Returns a float32 scalar with a graph (``create_graph``) so the penalty trains the critic. It is computed in
    float32 with autocast off: under FP16 autocast the squared gradient norm overflows/underflows easily and the
    double backward of some ops has no half kernel on the CPU.
    """
    b = real.shape[0]
    if alpha is None:
        alpha = torch.rand(b, device=real.device)
    alpha = alpha.to(device=real.device, dtype=torch.float32).view(b, *([1] * (real.dim() - 1)))
    with torch.autocast(device_type=real.device.type, enabled=False):
        x = (alpha * real.detach().float() + (1.0 - alpha) * fake.detach().float()).requires_grad_(True)
        score = critic(x).float()
        (grad,) = torch.autograd.grad(score.sum(), x, create_graph=True)
        norm = grad.flatten(1).norm(2, dim=1)
        return ((norm - 1.0) ** 2).mean()


@MODELS.register_module()
class GradientPenaltyLoss(nn.Module):
    """``loss_weight * gradient_penalty(critic, real, fake)`` (WGAN-GP uses ``loss_weight: 10``)."""

    def __init__(self, loss_weight: float = 10.0) -> None:
        super().__init__()
        self.loss_weight = float(loss_weight)

    def forward(self, critic: Callable[[torch.Tensor], torch.Tensor], real: torch.Tensor, fake: torch.Tensor,
                alpha: torch.Tensor | None = None) -> torch.Tensor:
        return gradient_penalty(critic, real, fake, alpha) * self.loss_weight
