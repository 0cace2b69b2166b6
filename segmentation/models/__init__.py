"""Segmentation models: importing this package registers every class in ``segmentation.registry.MODELS``."""

from . import backbones, heads, losses, necks, segmentors
from .backbones import BiSeNetV2, ICNet, UNet
from .converters import convert_torchvision_deeplabv3, convert_torchvision_fcn
from .data_preprocessor import SegDataPreprocessor
from .heads import ASPPHead, BaseDecodeHead, DeepLabV3PlusHead, FCNHead, PSPHead
from .losses import (
    BinaryCrossEntropyLoss,
    CrossEntropyLoss,
    DiceLoss,
    FocalLoss,
    LovaszLoss,
    OhemCrossEntropyLoss,
)
from .necks import ICNeck
from .segmentors import EncoderDecoder

__all__ = [
    "ASPPHead",
    "BaseDecodeHead",
    "BinaryCrossEntropyLoss",
    "BiSeNetV2",
    "CrossEntropyLoss",
    "DeepLabV3PlusHead",
    "DiceLoss",
    "EncoderDecoder",
    "FCNHead",
    "FocalLoss",
    "LovaszLoss",
    "OhemCrossEntropyLoss",
    "ICNeck",
    "ICNet",
    "PSPHead",
    "SegDataPreprocessor",
    "UNet",
    "backbones",
    "convert_torchvision_deeplabv3",
    "convert_torchvision_fcn",
    "heads",
    "losses",
    "necks",
    "segmentors",
]
