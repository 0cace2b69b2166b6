"""Shared model parts. Importing this package registers every backbone in ``oars.registry.MODELS``
(it is that registry's ``location``)."""

from . import backbones, layers
from .backbones import MobileNetV2, ResNet
from .layers import ConvNormAct, build_activation_layer, build_norm_layer
from .utils import load_pretrained

__all__ = [
    "ConvNormAct",
    "MobileNetV2",
    "ResNet",
    "backbones",
    "build_activation_layer",
    "build_norm_layer",
    "layers",
    "load_pretrained",
]
