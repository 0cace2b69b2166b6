"""Detection necks."""

from .fpn import FPN, fpn_keys_from_torchvision
from .yolov3_neck import DetectionBlock, YOLOv3Neck

__all__ = ["FPN", "DetectionBlock", "YOLOv3Neck", "fpn_keys_from_torchvision"]
