"""The adversarial loss in its four usual forms: vanilla (BCE), LSGAN (MSE), WGAN and hinge."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from gan.registry import MODELS

GAN_TYPES = ("vanilla", "lsgan", "wgan", "hinge")


@MODELS.register_module()
class GANLoss(nn.Module):
    """Adversarial loss on discriminator outputs (logits, any shape, e.g. [B, 1] or a PatchGAN's [B, 1, h, w]).

    * ``vanilla``: ``BCEWithLogits(pred, label)`` (Goodfellow et al.; DCGAN, pix2pix);
    * ``lsgan``: ``MSE(pred, label)`` (Mao et al.; CycleGAN);
    * ``wgan``: ``-mean(pred)`` for real, ``mean(pred)`` for fake (Arjovsky et al.; with a gradient penalty: WGAN-GP);
    * ``hinge``: discriminator ``mean(relu(1 - pred))`` real / ``mean(relu(1 + pred))`` fake; generator
      ``-mean(pred)`` (Lim & Ye; SAGAN).
    ``real_label`` / ``fake_label`` are the targets of vanilla and lsgan (label smoothing: ``real_label: 0.9``).
    ``loss_weight`` scales the generator's loss only (the discriminator's objective is not re-weighted).

    Returns a scalar float32 tensor.
    """

    def __init__(self, gan_type: str = "vanilla", real_label: float = 1.0, fake_label: float = 0.0,
                 loss_weight: float = 1.0) -> None:
        super().__init__()
        if gan_type not in GAN_TYPES:
            raise ValueError(f"GANLoss.gan_type: expected one of {list(GAN_TYPES)}, got {gan_type!r}")
        self.gan_type = gan_type
        self.real_label = float(real_label)
        self.fake_label = float(fake_label)
        self.loss_weight = float(loss_weight)

    def forward(self, pred: torch.Tensor, target_is_real: bool, is_disc: bool = False) -> torch.Tensor:
        """``pred``: discriminator logits; ``target_is_real``: whether they should be judged real; ``is_disc``:
        the discriminator's loss (True) or the generator's (False, weighted by ``loss_weight``)."""
        pred = pred.float()
        if self.gan_type in ("vanilla", "lsgan"):
            target = torch.full_like(pred, self.real_label if target_is_real else self.fake_label)
            loss = (F.binary_cross_entropy_with_logits(pred, target) if self.gan_type == "vanilla"
                    else F.mse_loss(pred, target))
        elif self.gan_type == "wgan":
            loss = -pred.mean() if target_is_real else pred.mean()
        elif is_disc:  # hinge, discriminator
            loss = F.relu(1.0 - pred).mean() if target_is_real else F.relu(1.0 + pred).mean()
        else:  # hinge, generator
            loss = -pred.mean()
        return loss if is_disc else loss * self.loss_weight
