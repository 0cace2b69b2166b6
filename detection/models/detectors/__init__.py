"""Detectors."""

from .single_stage import SingleStageDetector
from .yolov3 import YOLOv3

__all__ = ["SingleStageDetector", "YOLOv3"]
