"""Detection necks."""

from .yolov3_neck import DetectionBlock, YOLOv3Neck

__all__ = ["DetectionBlock", "YOLOv3Neck"]
