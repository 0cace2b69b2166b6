"""Segmentation datasets (registered in ``segmentation.registry.DATASETS`` on import)."""

from segmentation.datasets.ade20k import ADE20K_CLASSES, ADE20KDataset
from segmentation.datasets.binary_folder import BinaryMaskFolderDataset, LoadBinaryMask, read_binary_mask
from segmentation.datasets.cityscapes import CityscapesDataset
from segmentation.datasets.lip import LIP_CLASSES, HumanParsingDataset, LIPDataset, parsing_palette
from segmentation.datasets.list_file import ListFileSegDataset
from segmentation.datasets.seg_dataset import SegDataset, read_name_list
from segmentation.datasets.voc import PascalVOCDataset

__all__ = ['ADE20K_CLASSES', 'ADE20KDataset', 'BinaryMaskFolderDataset', 'CityscapesDataset', 'HumanParsingDataset',
           'LIP_CLASSES', 'LIPDataset', 'ListFileSegDataset', 'LoadBinaryMask', 'PascalVOCDataset', 'SegDataset',
           'parsing_palette', 'read_binary_mask', 'read_name_list']
