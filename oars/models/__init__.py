"""Shared model parts. Importing this package registers every backbone in ``oars.registry.MODELS``
(it is that registry's ``location``)."""

from . import backbones, layers
from .backbones import DarkNet, MobileNetV1, MobileNetV2, MobileNetV3, ResNet
from .data_preprocessor import ImageDataPreprocessor
from .exported import ExportedModel
from .layers import ConvNormAct, build_activation_layer, build_norm_layer
from .utils import load_pretrained

__all__ = [
    "ConvNormAct",
    "DarkNet",
    "ExportedModel",
    "ImageDataPreprocessor",
    "MobileNetV1",
    "MobileNetV2",
    "MobileNetV3",
    "ResNet",
    "backbones",
    "build_activation_layer",
    "build_norm_layer",
    "layers",
    "load_pretrained",
]
