"""PASCAL VOC 2012 semantic segmentation (21 classes, background included)."""

from __future__ import annotations

from oars.errors import DataError
from segmentation.datasets.seg_dataset import SegDataset
from segmentation.registry import DATASETS


@DATASETS.register_module()
class PascalVOCDataset(SegDataset):
    """VOC2012 layout: ``JPEGImages/*.jpg``, ``SegmentationClass/*.png`` (palette PNGs, 255 on object
    borders = ignore) and a ``split`` such as ``ImageSets/Segmentation/train.txt`` (required: most
    JPEGImages have no segmentation label)."""

    METAINFO = dict(
        classes=('background', 'aeroplane', 'bicycle', 'bird', 'boat', 'bottle', 'bus', 'car', 'cat', 'chair',
                 'cow', 'diningtable', 'dog', 'horse', 'motorbike', 'person', 'pottedplant', 'sheep', 'sofa',
                 'train', 'tvmonitor'),
        palette=[[0, 0, 0], [128, 0, 0], [0, 128, 0], [128, 128, 0], [0, 0, 128], [128, 0, 128], [0, 128, 128],
                 [128, 128, 128], [64, 0, 0], [192, 0, 0], [64, 128, 0], [192, 128, 0], [64, 0, 128],
                 [192, 0, 128], [64, 128, 128], [192, 128, 128], [0, 64, 0], [128, 64, 0], [0, 192, 0],
                 [128, 192, 0], [0, 64, 128]],
    )

    def __init__(self, split: str | None = None, img_dir: str = 'JPEGImages',
                 ann_dir: str | None = 'SegmentationClass', **kwargs) -> None:
        if not split:
            raise DataError('PascalVOCDataset needs split (e.g. ImageSets/Segmentation/train.txt): '
                            'most JPEGImages have no segmentation label')
        super().__init__(split=split, img_dir=img_dir, ann_dir=ann_dir, **kwargs)
