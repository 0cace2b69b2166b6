"""Segmentation-specific backbones (shared ones such as ResNet live in ``oars.models.backbones``)."""

from .bisenetv2 import BiSeNetV2
from .icnet import ICNet
from .unet import UNet

__all__ = ["BiSeNetV2", "ICNet", "UNet"]
