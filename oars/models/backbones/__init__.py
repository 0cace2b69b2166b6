"""Shared backbones (registered in ``oars.registry.MODELS`` on import)."""

from .darknet import DarkNet
from .mobilenet_v1 import MobileNetV1
from .mobilenet_v2 import MobileNetV2
from .mobilenet_v3 import MobileNetV3
from .resnet import ResNet
from .senet import SENet

__all__ = ["DarkNet", "MobileNetV1", "MobileNetV2", "MobileNetV3", "ResNet", "SENet"]
