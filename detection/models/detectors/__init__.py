"""Detectors."""

from .single_stage import SingleStageDetector
from .two_stage import CascadeRCNN, FasterRCNN, MaskRCNN, TwoStageDetector
from .yolov3 import YOLOv3

__all__ = ["CascadeRCNN", "FasterRCNN", "MaskRCNN", "SingleStageDetector", "TwoStageDetector", "YOLOv3"]
