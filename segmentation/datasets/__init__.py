"""Segmentation datasets (registered in ``segmentation.registry.DATASETS`` on import)."""

from segmentation.datasets.cityscapes import CityscapesDataset
from segmentation.datasets.seg_dataset import SegDataset, generate_palette
from segmentation.datasets.voc import PascalVOCDataset

__all__ = ['CityscapesDataset', 'PascalVOCDataset', 'SegDataset', 'generate_palette']
