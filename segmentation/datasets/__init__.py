"""Segmentation datasets (registered in ``segmentation.registry.DATASETS`` on import)."""

from segmentation.datasets.cityscapes import CityscapesDataset
from segmentation.datasets.seg_dataset import SegDataset
from segmentation.datasets.voc import PascalVOCDataset

__all__ = ['CityscapesDataset', 'PascalVOCDataset', 'SegDataset']
