"""Recognizer heads (registered in ``video.registry.MODELS``)."""

from .base import BaseHead
from .i3d_head import I3DHead
from .tsn_head import TSMHead, TSNHead

# isort: split
from .stnet_head import StNetHead

__all__ = ["BaseHead", "I3DHead", "StNetHead", "TSMHead", "TSNHead"]
