"""PASCAL VOC 2012 semantic segmentation (21 classes, background included), alone or with SBD's extra labels."""

from __future__ import annotations

import os
from collections.abc import Sequence

from oars.errors import DataError
from segmentation.datasets.seg_dataset import SegDataset, read_name_list
from segmentation.registry import DATASETS


def _as_list(value: str | Sequence[str] | None, what: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, Sequence) or not value or not all(isinstance(v, str) and v for v in value):
        raise DataError(f'PascalVOCDataset: {what} must be a path or a non-empty list of paths, got {value!r}')
    return list(value)


@DATASETS.register_module()
class PascalVOCDataset(SegDataset):
    """VOC2012 layout: ``JPEGImages/*.jpg``, ``SegmentationClass/*.png`` (palette PNGs, 255 on object
    borders = ignore) and a ``split`` such as ``ImageSets/Segmentation/train.txt`` (required: most
    JPEGImages have no segmentation label).

    ``split`` may be a list of split files and ``ann_dir`` a list of label folders of the same length, the
    i-th folder holding the labels of the i-th list (one folder serves them all). That is the augmented VOC
    of the DeepLab papers as mmseg builds it: ``[train.txt, aug.txt]`` with ``[SegmentationClass,
    SegmentationClassAug]`` (SBD's labels of the images VOC leaves unlabelled; 1464 + 9118 = 10582 images).
    A name listed twice (in one list or two) is an error: it would be trained twice, maybe with two labels.
    """

    METAINFO = dict(
        classes=('background', 'aeroplane', 'bicycle', 'bird', 'boat', 'bottle', 'bus', 'car', 'cat', 'chair',
                 'cow', 'diningtable', 'dog', 'horse', 'motorbike', 'person', 'pottedplant', 'sheep', 'sofa',
                 'train', 'tvmonitor'),
        palette=[[0, 0, 0], [128, 0, 0], [0, 128, 0], [128, 128, 0], [0, 0, 128], [128, 0, 128], [0, 128, 128],
                 [128, 128, 128], [64, 0, 0], [192, 0, 0], [64, 128, 0], [192, 128, 0], [64, 0, 128],
                 [192, 0, 128], [64, 128, 128], [192, 128, 128], [0, 64, 0], [128, 64, 0], [0, 192, 0],
                 [128, 192, 0], [0, 64, 128]],
    )

    def __init__(self, split: str | Sequence[str] | None = None, img_dir: str = 'JPEGImages',
                 ann_dir: str | Sequence[str] | None = 'SegmentationClass', **kwargs) -> None:
        if not split:
            raise DataError('PascalVOCDataset needs split (e.g. ImageSets/Segmentation/train.txt): '
                            'most JPEGImages have no segmentation label')
        self.splits = _as_list(split, 'split')
        if ann_dir is None:
            self.ann_dirs: list[str | None] = [None] * len(self.splits)
        else:
            ann_dirs = _as_list(ann_dir, 'ann_dir')
            if len(ann_dirs) == 1:
                ann_dirs = ann_dirs * len(self.splits)
            if len(ann_dirs) != len(self.splits):
                raise DataError(f'PascalVOCDataset: ann_dir lists {len(ann_dirs)} folders {ann_dirs} for '
                                f'{len(self.splits)} split files {self.splits}; expected one folder, or one '
                                'per split file in the same order')
            self.ann_dirs = list(ann_dirs)
        super().__init__(split=self.splits[0], img_dir=img_dir, ann_dir=self.ann_dirs[0], **kwargs)

    def _under_root(self, path: str | None) -> str | None:
        return None if path is None else os.path.join(self.data_root or '', path)

    def load_data_list(self) -> list[dict]:
        """The images of every split file in order, each with the label folder of its list."""
        img_dir = self.data_prefix['img_path']
        infos: list[dict] = []
        first_seen: dict[str, str] = {}
        for split, ann_dir in zip(self.splits, self.ann_dirs):
            split_file = self._under_root(split)
            names = read_name_list(split_file)
            for name in names:
                if name in first_seen:
                    also = '' if first_seen[name] == split_file else f' and in {first_seen[name]}'
                    raise DataError(f'PascalVOCDataset: image {name!r} is listed twice, in {split_file}{also}; '
                                    'expected each image once (aug.txt excludes the names of train.txt and '
                                    'val.txt; trainaug.txt already holds train.txt)')
                first_seen[name] = split_file
            infos += self.pair_infos(names, img_dir, self._under_root(ann_dir), split_file)
        return infos
