"""Detection datasets (registered in ``detection.registry.DATASETS`` on import)."""

from detection.datasets.annotation_checks import BadAnnotationWarning
from detection.datasets.coco import COCO_CLASSES, CocoDataset
from detection.datasets.multi_image_mix import MultiImageMixDataset
from detection.datasets.voc import VOC_CLASSES, VOCDataset
from detection.datasets.yolo_txt import YOLOTxtDataset

__all__ = ['COCO_CLASSES', 'VOC_CLASSES', 'BadAnnotationWarning', 'CocoDataset', 'MultiImageMixDataset', 'VOCDataset',
           'YOLOTxtDataset']
