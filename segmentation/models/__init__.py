"""Segmentation models: importing this package registers every class in ``segmentation.registry.MODELS``."""

from . import backbones, heads, losses, necks, segmentors
from .backbones import BiSeNetV2, ICNet, UNet
from .converters import convert_torchvision_deeplabv3, convert_torchvision_fcn
from .data_preprocessor import SegDataPreprocessor
from .heads import ACE2PHead, ASPPHead, BaseDecodeHead, DeepLabV3PlusHead, FCNHead, PSPHead
from .losses import (
    BinaryCrossEntropyLoss,
    CrossEntropyLoss,
    DiceLoss,
    EdgeCrossEntropyLoss,
    FocalLoss,
    LovaszLoss,
    OhemCrossEntropyLoss,
)
from .necks import ICNeck
from .segmentors import ACE2PSegmentor, EncoderDecoder

__all__ = [
    "ACE2PHead",
    "ACE2PSegmentor",
    "ASPPHead",
    "BaseDecodeHead",
    "BinaryCrossEntropyLoss",
    "BiSeNetV2",
    "CrossEntropyLoss",
    "DeepLabV3PlusHead",
    "DiceLoss",
    "EdgeCrossEntropyLoss",
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
