"""Detection-specific backbones (SSD's VGG-16 with its extra layers, SSDLite's MobileNetV3 extractor)."""

from .ssd_vgg import SSDVGG
from .ssdlite_mobilenet_v3 import SSDLiteMobileNetV3

__all__ = ["SSDLiteMobileNetV3", "SSDVGG"]
