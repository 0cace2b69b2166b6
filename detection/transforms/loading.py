"""Turn a data_info's ``instances`` into box arrays (and instance masks), and drop boxes too small to learn from."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from detection.registry import TRANSFORMS
from detection.transforms.boxes import select
from detection.transforms.instance_masks import decode_instance_masks
from oars.data.transforms.loading import exif_orientation
from oars.errors import DataError


def check_annotated_size(results: dict) -> None:
    """Raise ``DataError`` when the image size the annotation states (``results['height']``/``['width']``, from
    the COCO json or the VOC ``<size>``) is not the size of the image as read (``results['ori_shape']``): the
    dataset checked and clipped the boxes against the annotation's size, so they may not fit the real image.
    No check when either is missing."""
    shape, height, width = results.get('ori_shape'), results.get('height'), results.get('width')
    if shape is None or height is None or width is None or (int(height), int(width)) == tuple(shape[:2]):
        return
    path = results.get('img_path', '?')
    ih, iw = shape[:2]
    why = ''
    if (int(height), int(width)) == (iw, ih) and path != '?' and exif_orientation(path) in (5, 6, 7, 8):
        why = (f' (the file has EXIF orientation {exif_orientation(path)}, which turns it by 90 degrees when read; '
               'annotate the image as displayed, or remove the tag)')
    raise DataError(f'image {path} is {iw}x{ih} (WxH) but its annotation says width {int(width)}, height '
                    f'{int(height)}{why}; boxes were checked against the annotated size: fix width/height in the '
                    'annotation file or use the annotated image')


@TRANSFORMS.register_module()
class LoadAnnotations:
    """``results['instances']`` -> ``gt_bboxes`` float32 [N, 4] (x1, y1, x2, y2 pixels), ``gt_bboxes_labels``
    int64 [N] (0-based) and ``gt_ignore_flags`` bool [N] (crowd / difficult boxes); empty arrays of those
    shapes when the image has no instances. The annotation's image size must be the image's as read
    (``check_annotated_size``).

    ``with_mask=True`` also sets ``gt_masks``: uint8 0/1 bitmaps [N, H, W] of the image as read, one per box,
    from each instance's ``mask`` (COCO polygons or RLE, see ``detection.transforms.instance_masks``). As in
    MMDetection, an instance whose segmentation has no usable polygon gets an all-zero mask and is made
    ignored (``gt_ignore_flags``); an instance without any ``mask`` is a ``DataError`` naming the image and
    the annotation. Put it right after ``LoadImageFromFile`` (masks are decoded at the image's loaded size).
    ``poly2mask`` must stay True: masks travel as bitmaps (polygon masks are not supported).
    """

    def __init__(self, with_bbox: bool = True, with_mask: bool = False, poly2mask: bool = True) -> None:
        if with_mask and not with_bbox:
            raise DataError('LoadAnnotations: with_mask=True needs with_bbox=True (each instance mask belongs to a '
                            'box; transforms drop masks with their boxes)')
        if not poly2mask:
            raise DataError('LoadAnnotations: poly2mask=False (masks kept as polygons) is not supported; instance '
                            'masks are bitmaps [N, H, W]: leave poly2mask at true')
        self.with_bbox = with_bbox
        self.with_mask = with_mask
        self.poly2mask = poly2mask

    def __call__(self, results: dict) -> dict:
        if not self.with_bbox:
            return results
        if 'instances' not in results:
            raise KeyError(f"LoadAnnotations needs results['instances'] (the dataset's per-image annotations), "
                           f"missing for {results.get('img_path', 'a sample')}")
        check_annotated_size(results)
        instances = results['instances']
        try:
            boxes = np.array([inst['bbox'] for inst in instances], dtype=np.float32).reshape(-1, 4)
            labels = np.array([inst['bbox_label'] for inst in instances], dtype=np.int64).reshape(-1)
        except (KeyError, TypeError, ValueError) as e:
            raise DataError(f"{results.get('img_path', 'a sample')}: each instance needs 'bbox' [x1, y1, x2, y2] and "
                            f"'bbox_label' (int): {e}") from e
        if len(boxes) != len(instances) or len(labels) != len(instances):
            raise DataError(f"{results.get('img_path', 'a sample')}: each instance's 'bbox' must have 4 numbers, "
                            f"got {len(instances)} instances and {boxes.size} box values")
        results['gt_bboxes'] = boxes
        results['gt_bboxes_labels'] = labels
        results['gt_ignore_flags'] = np.array([bool(inst.get('ignore_flag', 0)) for inst in instances],
                                              dtype=bool).reshape(-1)
        if self.with_mask:
            height, width = self._mask_size(results)
            masks, unusable = decode_instance_masks(instances, height, width, results.get('img_path', 'a sample'))
            results['gt_masks'] = masks
            results['gt_ignore_flags'] |= unusable
        return results

    @staticmethod
    def _mask_size(results: dict) -> tuple[int, int]:
        """(H, W) to decode masks at: the image as loaded (``ori_shape``, else the annotation's height/width);
        ``DataError`` when the image in ``results`` already has another size (a transform ran before)."""
        shape = results.get('ori_shape')
        if shape is None and results.get('height') is not None and results.get('width') is not None:
            shape = (results['height'], results['width'])
        img = results.get('img')
        if shape is None and img is not None:
            shape = img.shape[:2]
        if shape is None:
            raise KeyError(f"LoadAnnotations(with_mask=True) needs the image size: put LoadImageFromFile first "
                           f"({results.get('img_path', 'a sample')})")
        h, w = int(shape[0]), int(shape[1])
        if img is not None and tuple(img.shape[:2]) != (h, w):
            raise DataError(f"{results.get('img_path', 'a sample')}: the image is {img.shape[1]}x{img.shape[0]} "
                            f'(WxH) but was loaded as {w}x{h}; put LoadAnnotations right after LoadImageFromFile, '
                            'before transforms that change the image size')
        return h, w

    def __repr__(self) -> str:
        return f'{type(self).__name__}(with_bbox={self.with_bbox}, with_mask={self.with_mask})'


@TRANSFORMS.register_module()
class FilterAnnotations:
    """Drop boxes narrower than ``min_gt_bbox_wh[0]`` or shorter than ``min_gt_bbox_wh[1]`` pixels, with their
    labels, ignore flags and instance masks.

    ``keep_empty=True`` keeps a sample whose boxes were all dropped (it trains as background);
    ``keep_empty=False`` returns None for it, so the dataset fetches another sample. (Note: mmdet's flag of
    the same name means the opposite.)
    """

    def __init__(self, min_gt_bbox_wh: Sequence[float] = (1, 1), keep_empty: bool = True) -> None:
        if len(min_gt_bbox_wh) != 2 or min(min_gt_bbox_wh) < 0:
            raise DataError(f'FilterAnnotations.min_gt_bbox_wh must be (min_w, min_h) >= 0, got {min_gt_bbox_wh!r}')
        self.min_gt_bbox_wh = (float(min_gt_bbox_wh[0]), float(min_gt_bbox_wh[1]))
        self.keep_empty = keep_empty

    def __call__(self, results: dict) -> dict | None:
        if results.get('gt_bboxes') is None:
            return results
        boxes = np.asarray(results['gt_bboxes'], dtype=np.float32).reshape(-1, 4)
        min_w, min_h = self.min_gt_bbox_wh
        keep = ((boxes[:, 2] - boxes[:, 0]) >= min_w) & ((boxes[:, 3] - boxes[:, 1]) >= min_h)
        results['gt_bboxes'] = boxes
        results = select(results, keep)
        if not keep.any() and not self.keep_empty:
            return None
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}(min_gt_bbox_wh={self.min_gt_bbox_wh}, keep_empty={self.keep_empty})'
