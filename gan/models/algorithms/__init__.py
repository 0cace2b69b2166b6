"""GAN models (one file each), registered in ``gan.registry.MODELS``."""

from .attgan import AttGAN
from .cgan import CGAN
from .cyclegan import CycleGAN
from .dcgan import DCGAN
from .pix2pix import Pix2Pix
from .stargan import StarGAN
from .stgan import STGAN

__all__ = ["CGAN", "STGAN", "AttGAN", "CycleGAN", "DCGAN", "Pix2Pix", "StarGAN"]
