"""Helpers the GAN models share: the image history pool, generator EMA, freezing, initialisation."""

from .ema import GeneratorEMA
from .image_pool import ImagePool
from .init import gan_normal_init
from .network import GANNetwork
from .requires_grad import requires_grad_off

__all__ = ["GANNetwork", "GeneratorEMA", "ImagePool", "gan_normal_init", "requires_grad_off"]
