"""Discriminators, registered in ``gan.registry.MODELS``."""

from .dcgan import DCGANDiscriminator
from .patch import PatchDiscriminator

__all__ = ["DCGANDiscriminator", "PatchDiscriminator"]
