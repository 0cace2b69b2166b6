"""Cityscapes semantic segmentation (19 train classes)."""

from __future__ import annotations

from segmentation.datasets.seg_dataset import SegDataset
from segmentation.registry import DATASETS


@DATASETS.register_module()
class CityscapesDataset(SegDataset):
    """Cityscapes layout: ``leftImg8bit/<split>/<city>/*_leftImg8bit.png`` and
    ``gtFine/<split>/<city>/*_gtFine_labelTrainIds.png`` (train ids 0..18, 255 = ignore; made by
    cityscapesscripts' ``createTrainIdLabelImgs``)."""

    METAINFO = dict(
        classes=('road', 'sidewalk', 'building', 'wall', 'fence', 'pole', 'traffic light', 'traffic sign',
                 'vegetation', 'terrain', 'sky', 'person', 'rider', 'car', 'truck', 'bus', 'train', 'motorcycle',
                 'bicycle'),
        palette=[[128, 64, 128], [244, 35, 232], [70, 70, 70], [102, 102, 156], [190, 153, 153], [153, 153, 153],
                 [250, 170, 30], [220, 220, 0], [107, 142, 35], [152, 251, 152], [70, 130, 180], [220, 20, 60],
                 [255, 0, 0], [0, 0, 142], [0, 0, 70], [0, 60, 100], [0, 80, 100], [0, 0, 230], [119, 11, 32]],
    )

    def __init__(self, img_dir: str = 'leftImg8bit/train', ann_dir: str | None = 'gtFine/train',
                 img_suffix: str = '_leftImg8bit.png', seg_map_suffix: str = '_gtFine_labelTrainIds.png',
                 **kwargs) -> None:
        super().__init__(img_dir=img_dir, ann_dir=ann_dir, img_suffix=img_suffix, seg_map_suffix=seg_map_suffix,
                         **kwargs)
