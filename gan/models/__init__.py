"""GAN models: importing this package registers every GAN, generator, discriminator and loss in ``gan.registry``
(``MODELS``) and the optimizer constructor (``OPTIM_WRAPPER_CONSTRUCTORS``)."""

from . import algorithms, discriminators, generators, losses
from .algorithms import CGAN, DCGAN, CycleGAN, Pix2Pix
from .base_gan import BaseGAN
from .data_preprocessor import GANDataPreprocessor
from .discriminators import DCGANDiscriminator, PatchDiscriminator
from .generators import DCGANGenerator, ResnetGenerator, UNetGenerator
from .losses import ClassificationLoss, GANLoss, GradientPenaltyLoss, L1Loss, gradient_penalty
from .optim_constructor import MultiOptimWrapperConstructor
from .utils import GeneratorEMA, ImagePool

__all__ = [
    "CGAN", "DCGAN", "BaseGAN", "ClassificationLoss", "CycleGAN", "DCGANDiscriminator", "DCGANGenerator",
    "GANDataPreprocessor", "GANLoss", "GeneratorEMA", "GradientPenaltyLoss", "ImagePool", "L1Loss",
    "MultiOptimWrapperConstructor", "PatchDiscriminator", "Pix2Pix", "ResnetGenerator", "UNetGenerator",
    "algorithms", "discriminators", "generators", "gradient_penalty", "losses",
]
