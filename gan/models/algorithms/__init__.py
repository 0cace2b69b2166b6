"""GAN models (one file each), registered in ``gan.registry.MODELS``."""

from .cgan import CGAN
from .cyclegan import CycleGAN
from .dcgan import DCGAN
from .pix2pix import Pix2Pix

__all__ = ["CGAN", "CycleGAN", "DCGAN", "Pix2Pix"]
