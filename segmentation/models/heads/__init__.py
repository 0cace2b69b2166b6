"""Decode heads: features -> per-class logits at the head's resolution."""

from .ace2p_head import ACE2PContext, ACE2PEdge, ACE2PHead
from .aspp_head import ASPP, ASPPHead, ASPPPooling, DepthwiseSeparableConv
from .decode_head import BaseDecodeHead
from .deeplabv3plus_head import DeepLabV3PlusHead
from .fcn_head import FCNHead
from .psp_head import PSPHead, PyramidPoolingModule

__all__ = [
    "ACE2PContext",
    "ACE2PEdge",
    "ACE2PHead",
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
