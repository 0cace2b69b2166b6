"""GAN models: importing this package registers every GAN, generator, discriminator and loss in ``gan.registry``."""

from .data_preprocessor import GANDataPreprocessor

__all__ = ["GANDataPreprocessor"]
