"""Detection heads."""

from .yolov3_head import YOLOv3Head

__all__ = ["YOLOv3Head"]
