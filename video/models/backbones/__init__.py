"""Video backbones (registered in ``video.registry.MODELS``). TSN uses the shared ``oars`` ResNet directly."""

from .non_local import NonLocalBlock
from .r2plus1d import R2Plus1D
from .resnet_nl import ResNetNL
from .resnet_tsm import ResNetTSM
from .temporal_shift import ShiftConv2d, temporal_shift

# isort: split
from .stnet import StNet

__all__ = ["NonLocalBlock", "R2Plus1D", "ResNetNL", "ResNetTSM", "ShiftConv2d", "StNet", "temporal_shift"]
