"""Second-stage (RoI) heads of two-stage detectors: RoI feature extraction, box and mask heads, the
Faster/Mask R-CNN and (class-aware) Cascade R-CNN RoI heads, and the C4 shared head. Their inference, shared by eager
``predict`` and the ONNX export, is :mod:`.two_stage_infer`; their train/test configs :mod:`.rcnn_config`."""

from .bbox_heads import BBoxHead
from .cascade_cls_aware import CascadeClsAwareRoIHead
from .cascade_roi_head import CascadeRoIHead
from .convert import roi_head_from_torchvision
from .convfc_bbox_head import ConvFCBBoxHead, Shared2FCBBoxHead, Shared4Conv1FCBBoxHead
from .mask_head import FCNMaskHead, mask_targets
from .mask_paste import paste_masks
from .roi_extractor import SingleRoIExtractor
from .shared_head import ResLayer
from .standard_roi_head import StandardRoIHead
from .utils import bbox2roi

__all__ = [
    "BBoxHead",
    "CascadeClsAwareRoIHead",
    "CascadeRoIHead",
    "ConvFCBBoxHead",
    "FCNMaskHead",
    "ResLayer",
    "Shared2FCBBoxHead",
    "Shared4Conv1FCBBoxHead",
    "SingleRoIExtractor",
    "StandardRoIHead",
    "bbox2roi",
    "mask_targets",
    "paste_masks",
    "roi_head_from_torchvision",
]
