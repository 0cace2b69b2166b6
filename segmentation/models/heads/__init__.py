"""Decode heads: features -> per-class logits at the head's resolution."""

from .aspp_head import ASPP, ASPPHead, ASPPPooling, DepthwiseSeparableConv
from .decode_head import BaseDecodeHead
from .deeplabv3plus_head import DeepLabV3PlusHead
from .fcn_head import FCNHead
from .psp_head import PSPHead, PyramidPoolingModule

__all__ = [
    "ASPP",
    "ASPPHead",
    "ASPPPooling",
    "BaseDecodeHead",
    "DeepLabV3PlusHead",
    "DepthwiseSeparableConv",
    "FCNHead",
    "PSPHead",
    "PyramidPoolingModule",
]
