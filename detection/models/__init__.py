"""Detection models: importing this package registers every class in ``detection.registry.MODELS``."""

from . import (
    backbones,  # registers SSDVGG, SSDLiteMobileNetV3
    batch_augments,
    data_preprocessor,
    detectors,
    heads,
    losses,
    necks,
    task_utils,
    torchvision_box_coder,  # registers TorchvisionBoxCoder (TASK_UTILS)
    torchvision_preprocessor,  # registers TorchvisionRCNNPreprocessor
    torchvision_ssd_preprocessor,  # registers TorchvisionSSDPreprocessor
)
from . import roi_heads as roi_heads  # registers the RoI extractors, box/mask heads and RoI heads
from .batch_augments import BatchRandomResize
from .data_preprocessor import DetDataPreprocessor
from .detectors import SingleStageDetector, YOLOv3
from .heads import YOLOv3Head
from .necks import YOLOv3Neck
from .task_utils import YOLOAssigner, multiclass_nms
from .torchvision_preprocessor import TorchvisionRCNNPreprocessor

__all__ = [
    "BatchRandomResize",
    "DetDataPreprocessor",
    "SingleStageDetector",
    "TorchvisionRCNNPreprocessor",
    "YOLOAssigner",
    "YOLOv3",
    "YOLOv3Head",
    "YOLOv3Neck",
    "backbones",
    "batch_augments",
    "data_preprocessor",
    "detectors",
    "heads",
    "losses",
    "multiclass_nms",
    "necks",
    "task_utils",
    "torchvision_box_coder",
    "torchvision_preprocessor",
    "torchvision_ssd_preprocessor",
]
