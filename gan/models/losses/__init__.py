"""GAN losses, registered in ``gan.registry.MODELS`` (configs: ``gan_loss: {type: GANLoss, gan_type: lsgan}``)."""

from .classification_loss import ClassificationLoss
from .gan_loss import GANLoss
from .gradient_penalty import GradientPenaltyLoss, gradient_penalty
from .pixel_loss import L1Loss

__all__ = ["ClassificationLoss", "GANLoss", "GradientPenaltyLoss", "L1Loss", "gradient_penalty"]
