"""PASCAL VOC 2012 semantic segmentation (21 classes, background included)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

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

    def __init__(
        self,
        data_root: str = '',
        img_dir: str = 'JPEGImages',
        ann_dir: str | None = 'SegmentationClass',
        img_suffix: str = '.jpg',
        seg_map_suffix: str = '.png',
        split: str | None = None,
        classes: Sequence[str] | None = None,
        palette: Sequence[Sequence[int]] | None = None,
        ignore_index: int = 255,
        reduce_zero_label: bool = False,
        pipeline: Sequence[dict | Callable] = (),
        test_mode: bool = False,
        serialize_data: bool = True,
        lazy_init: bool = False,
        indices: int | Sequence[int] | None = None,
        max_refetch: int = 1000,
    ) -> None:
        if not split:
            raise DataError('PascalVOCDataset needs split (e.g. ImageSets/Segmentation/train.txt): '
                             'most JPEGImages have no segmentation label')
        super().__init__(
            data_root=data_root, img_dir=img_dir, ann_dir=ann_dir, img_suffix=img_suffix,
            seg_map_suffix=seg_map_suffix, classes=classes, palette=palette, ignore_index=ignore_index,
            reduce_zero_label=reduce_zero_label, split=split, pipeline=pipeline, test_mode=test_mode,
            serialize_data=serialize_data, lazy_init=lazy_init, indices=indices, max_refetch=max_refetch)
