"""Segmentation-specific backbones (shared ones such as ResNet live in ``oars.models.backbones``)."""

from .unet import UNet

__all__ = ["UNet"]
