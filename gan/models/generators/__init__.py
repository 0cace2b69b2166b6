"""Generators, registered in ``gan.registry.MODELS``."""

from .dcgan import DCGANGenerator
from .resnet import ResnetGenerator
from .unet import UNetGenerator

__all__ = ["DCGANGenerator", "ResnetGenerator", "UNetGenerator"]
