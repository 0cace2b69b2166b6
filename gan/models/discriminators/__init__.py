"""Discriminators, registered in ``gan.registry.MODELS``."""

from .attgan_discriminator import AttGANDiscriminator
from .dcgan import DCGANDiscriminator
from .patch import PatchDiscriminator
from .stargan_discriminator import StarGANDiscriminator

__all__ = ["AttGANDiscriminator", "DCGANDiscriminator", "PatchDiscriminator", "StarGANDiscriminator"]
