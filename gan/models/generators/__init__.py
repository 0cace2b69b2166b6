"""Generators, registered in ``gan.registry.MODELS``."""

from .attgan_generator import AttGANGenerator
from .dcgan import DCGANGenerator
from .resnet import ResnetGenerator
from .stargan_generator import StarGANGenerator
from .stgan_generator import SelectiveTransferUnit, STGANGenerator
from .unet import UNetGenerator

__all__ = ["AttGANGenerator", "DCGANGenerator", "ResnetGenerator", "STGANGenerator", "SelectiveTransferUnit",
           "StarGANGenerator", "UNetGenerator"]
