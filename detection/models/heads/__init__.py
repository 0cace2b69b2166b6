"""Detection heads."""

from .rpn_head import RPNHead
from .yolov3_head import YOLOv3Head

__all__ = ["RPNHead", "YOLOv3Head"]
