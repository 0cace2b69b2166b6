"""Shared backbones (registered in ``oars.registry.MODELS`` on import)."""

from .mobilenet_v2 import MobileNetV2
from .resnet import ResNet

__all__ = ["MobileNetV2", "ResNet"]
