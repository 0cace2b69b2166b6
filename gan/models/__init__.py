"""GAN models: importing this package registers every GAN, generator, discriminator and loss in ``gan.registry``
(``MODELS``) and the optimizer constructor (``OPTIM_WRAPPER_CONSTRUCTORS``)."""

from . import algorithms, discriminators, generators, losses
from .algorithms import CGAN, DCGAN, STGAN, AttGAN, CycleGAN, Pix2Pix, StarGAN
from .base_gan import BaseGAN
from .data_preprocessor import GANDataPreprocessor
from .discriminators import AttGANDiscriminator, DCGANDiscriminator, PatchDiscriminator, StarGANDiscriminator
from .generators import (
    AttGANGenerator,
    DCGANGenerator,
    ResnetGenerator,
    StarGANGenerator,
    STGANGenerator,
    UNetGenerator,
)
from .losses import ClassificationLoss, GANLoss, GradientPenaltyLoss, L1Loss, gradient_penalty
from .optim_constructor import MultiOptimWrapperConstructor
from .utils import GeneratorEMA, ImagePool

__all__ = [
    "AttGAN", "AttGANDiscriminator", "AttGANGenerator", "BaseGAN", "CGAN", "ClassificationLoss", "CycleGAN", "DCGAN",
    "DCGANDiscriminator", "DCGANGenerator", "GANDataPreprocessor", "GANLoss", "GeneratorEMA", "GradientPenaltyLoss",
    "ImagePool", "L1Loss", "MultiOptimWrapperConstructor", "PatchDiscriminator", "Pix2Pix", "ResnetGenerator",
    "STGAN", "STGANGenerator", "StarGAN", "StarGANDiscriminator", "StarGANGenerator", "UNetGenerator", "algorithms",
    "discriminators", "generators", "gradient_penalty", "losses"
]
