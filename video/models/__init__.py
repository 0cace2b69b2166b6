"""Video models: importing this package registers every recognizer, backbone, head, loss and consensus module in
``video.registry`` (its ``MODELS`` / ``TASK_UTILS`` locations)."""

from . import backbones, heads, losses, recognizers, task_utils
from .backbones import NonLocalBlock, R2Plus1D, ResNetNL, ResNetTSM, StNet
from .converters import convert_torchvision_r2plus1d
from .data_preprocessor import ActionDataPreprocessor
from .heads import BaseHead, I3DHead, StNetHead, TSMHead, TSNHead
from .losses import BCELossWithLogits, CrossEntropyLoss
from .recognizers import BaseRecognizer, Recognizer2D, Recognizer3D
from .task_utils import AvgConsensus, MaxConsensus

# isort: split
# The other video model families (their own packages, registered on import like the rest).
from . import feature_models, localizers
from .feature_models import FeatureRecognizer

__all__ = [
    "ActionDataPreprocessor",
    "AvgConsensus",
    "BCELossWithLogits",
    "BaseHead",
    "BaseRecognizer",
    "CrossEntropyLoss",
    "FeatureRecognizer",
    "I3DHead",
    "MaxConsensus",
    "NonLocalBlock",
    "R2Plus1D",
    "Recognizer2D",
    "Recognizer3D",
    "ResNetNL",
    "ResNetTSM",
    "StNet",
    "StNetHead",
    "TSMHead",
    "TSNHead",
    "backbones",
    "convert_torchvision_r2plus1d",
    "feature_models",
    "heads",
    "localizers",
    "losses",
    "recognizers",
    "task_utils",
]

