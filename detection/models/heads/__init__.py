"""Detection heads."""

from .fcos_head import FCOSHead
from .retina_head import RetinaHead
from .rpn_head import RPNHead
from .ssd_head import SSDHead
from .yolov3_head import YOLOv3Head

__all__ = ["FCOSHead", "RetinaHead", "RPNHead", "SSDHead", "YOLOv3Head"]
