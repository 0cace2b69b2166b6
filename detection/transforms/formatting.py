"""Pack a pipeline's results into what the detector's data preprocessor takes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from mmengine.structures import InstanceData

from detection.registry import TRANSFORMS
from detection.structures import DetDataSample
from detection.transforms.boxes import box_fields
from oars.data.transforms.albu import MASKS_KEY
from oars.errors import DataError

DEFAULT_META_KEYS = ('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor', 'flip', 'flip_direction')


def _instances(boxes: np.ndarray, labels: np.ndarray, masks: np.ndarray | None = None) -> InstanceData:
    inst = InstanceData(bboxes=torch.from_numpy(np.ascontiguousarray(boxes, dtype=np.float32)),
                        labels=torch.from_numpy(np.ascontiguousarray(labels, dtype=np.int64)))
    if masks is not None:
        inst.masks = torch.from_numpy(np.ascontiguousarray(masks, dtype=np.uint8))
    return inst


def _masks(results: dict, num_boxes: int) -> np.ndarray | None:
    """``results['gt_masks']`` as uint8 [N, H, W] with the image's (H, W), or None; ``DataError`` otherwise."""
    masks = results.get(MASKS_KEY)
    if masks is None:
        return None
    masks = np.asarray(masks)
    shape = results['img'].shape[:2]
    if masks.ndim != 3 or len(masks) != num_boxes or masks.shape[1:] != shape:
        raise DataError(f"{results.get('img_path', 'a sample')}: gt_masks has shape {tuple(masks.shape)}; expected "
                        f'[{num_boxes}, {shape[0]}, {shape[1]}] (one mask per gt box, the image\'s size): a transform '
                        'in the pipeline moved the boxes or the image without the masks')
    return masks


@TRANSFORMS.register_module()
class PackDetInputs:
    """Results -> ``{'inputs': [C, H, W] tensor, 'data_samples': DetDataSample}``.

    ``inputs`` keeps the image's dtype (uint8 BGR: the data preprocessor normalises on the device).
    When ``gt_bboxes`` exist, ``gt_instances`` holds the boxes not flagged in ``gt_ignore_flags`` and
    ``ignored_instances`` the flagged ones (``bboxes`` float32 [N, 4], ``labels`` int64 [N] and, when the
    pipeline loaded instance masks, ``masks`` uint8 [N, H, W] 0/1 at the image's size before batch padding).
    ``meta_keys`` present in results become metainfo.
    """

    def __init__(self, meta_keys: Sequence[str] = DEFAULT_META_KEYS) -> None:
        self.meta_keys = tuple(meta_keys)

    def __call__(self, results: dict) -> dict:
        if results.get('img') is None:
            raise KeyError("PackDetInputs needs results['img']; put LoadImageFromFile first")
        img = results['img']
        if img.ndim == 2:
            img = img[..., None]
        inputs = torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1)))
        sample = DetDataSample()
        if results.get('gt_bboxes') is not None:
            fields = box_fields(results)
            ignored = fields['gt_ignore_flags']
            masks = _masks(results, len(ignored))
            gt_masks = ign_masks = None
            if masks is not None:  # no copy of the (large) masks when nothing is ignored
                gt_masks, ign_masks = (masks[~ignored], masks[ignored]) if ignored.any() else (masks, masks[:0])
            sample.gt_instances = _instances(fields['gt_bboxes'][~ignored], fields['gt_bboxes_labels'][~ignored],
                                             gt_masks)
            sample.ignored_instances = _instances(fields['gt_bboxes'][ignored], fields['gt_bboxes_labels'][ignored],
                                                  ign_masks)
        sample.set_metainfo({k: results[k] for k in self.meta_keys if k in results})
        return {'inputs': inputs, 'data_samples': sample}

    def __repr__(self) -> str:
        return f'{type(self).__name__}(meta_keys={self.meta_keys})'
