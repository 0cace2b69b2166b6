"""Foreground/background segmentation from a folder of images and a folder of binary masks."""

from __future__ import annotations

import os

import numpy as np
from PIL import Image

from oars.data.transforms.loading import apply_orientation, exif_orientation, read_label_map
from oars.errors import DataError
from segmentation.datasets.seg_dataset import SegDataset
from segmentation.registry import DATASETS
from segmentation.transforms import LoadSegAnnotations, check_label_size

_COLOUR_MODES = ('RGB', 'RGBA', 'LA')


def read_binary_mask(path: str, threshold: float = 0) -> np.ndarray:
    """``[H, W]`` uint8 mask of ``path``: 1 where the stored value is above ``threshold``, else 0.

    Index and greyscale files (0/255 or 0/1 PNGs, 16-bit masks) are compared as stored; colour files (a mask
    saved as RGB/RGBA) by their luminance, alpha dropped. EXIF orientation is applied as to the images
    (``oars.data.transforms.loading``). Missing or unreadable files raise the loader's errors, naming the file.
    """
    mode = None
    if os.path.isfile(path):
        try:
            with Image.open(path) as im:
                mode = im.mode
        except (OSError, ValueError, SyntaxError, Image.DecompressionBombError):
            mode = None  # read_label_map below reports the file as unreadable
    if mode in _COLOUR_MODES:
        try:
            with Image.open(path) as im:
                values = np.array(im.convert('L'))
        except (OSError, ValueError, SyntaxError) as err:
            raise DataError(f'could not read mask (corrupt or not an image file: {err}): {path}') from None
        values = apply_orientation(values, exif_orientation(path))
    else:
        values = read_label_map(path)
    return (values > threshold).astype(np.uint8)


class LoadBinaryMask(LoadSegAnnotations):
    """``LoadSegAnnotations`` for binary masks: ``gt_seg_map`` is 1 where the mask is above ``threshold``
    (``read_binary_mask``), 0 elsewhere, checked to be the image's size. ``BinaryMaskFolderDataset`` puts it in
    place of each ``LoadSegAnnotations`` of its pipeline."""

    def __init__(self, threshold: float = 0) -> None:
        super().__init__(reduce_zero_label=False)
        self.threshold = threshold

    def __call__(self, results: dict) -> dict:
        path = results.get('seg_map_path')
        if not path:
            raise KeyError("LoadBinaryMask needs results['seg_map_path']; was the dataset built without ann_dir?")
        path = os.fspath(path)
        seg = read_binary_mask(path, self.threshold)
        check_label_size(seg, path, results)
        results['gt_seg_map'] = seg
        results['reduce_zero_label'] = False
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}(threshold={self.threshold})'


@DATASETS.register_module()
class BinaryMaskFolderDataset(SegDataset):
    """Images in ``data_root/img_dir`` and masks of the same relative name in ``data_root/ann_dir`` where any
    value above ``threshold`` (default 0: any non-zero pixel, e.g. 255 in a 0/255 PNG) is foreground.

    Classes are ``('background', 'foreground')``. Why a dataset of its own: read as label maps, a 0/255 mask
    would pass as "background and ignore" (255 is the usual ``ignore_index``) and a JPEG mask's 1..254 would
    be out of range; so every ``LoadSegAnnotations`` step of the pipeline is replaced by ``LoadBinaryMask``
    with this ``threshold`` (use e.g. 127 for JPEG-compressed masks). Configs keep the usual pipeline.
    Other arguments: see ``SegDataset`` (``reduce_zero_label`` must stay False).
    """

    METAINFO = dict(classes=('background', 'foreground'), palette=[[0, 0, 0], [255, 255, 255]])

    def __init__(self, img_dir: str = 'images', ann_dir: str | None = 'masks', img_suffix: str = '.jpg',
                 seg_map_suffix: str = '.png', threshold: float = 0, **kwargs) -> None:
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not np.isfinite(threshold):
            raise DataError(f'BinaryMaskFolderDataset: threshold must be a number (foreground = mask value above '
                            f'it), got {threshold!r}')
        if kwargs.get('reduce_zero_label'):
            raise DataError('BinaryMaskFolderDataset: reduce_zero_label does not apply to binary masks '
                            '(0 is background, not "unlabelled")')
        self.threshold = threshold
        super().__init__(img_dir=img_dir, ann_dir=ann_dir, img_suffix=img_suffix, seg_map_suffix=seg_map_suffix,
                         **kwargs)
        steps = self.pipeline.transforms
        for i, step in enumerate(steps):
            if type(step) is LoadSegAnnotations:
                steps[i] = LoadBinaryMask(threshold)
