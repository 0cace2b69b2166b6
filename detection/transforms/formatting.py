"""Pack a pipeline's results into what the detector's data preprocessor takes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from mmengine.structures import InstanceData

from detection.registry import TRANSFORMS
from detection.structures import DetDataSample
from detection.transforms.boxes import box_fields

DEFAULT_META_KEYS = ('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor', 'flip', 'flip_direction')


def _instances(boxes: np.ndarray, labels: np.ndarray) -> InstanceData:
    return InstanceData(bboxes=torch.from_numpy(np.ascontiguousarray(boxes, dtype=np.float32)),
                        labels=torch.from_numpy(np.ascontiguousarray(labels, dtype=np.int64)))


@TRANSFORMS.register_module()
class PackDetInputs:
    """Results -> ``{'inputs': [C, H, W] tensor, 'data_samples': DetDataSample}``.

    ``inputs`` keeps the image's dtype (uint8 BGR: the data preprocessor normalises on the device).
    When ``gt_bboxes`` exist, ``gt_instances`` holds the boxes not flagged in ``gt_ignore_flags`` and
    ``ignored_instances`` the flagged ones (``bboxes`` float32 [N, 4], ``labels`` int64 [N]).
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
            sample.gt_instances = _instances(fields['gt_bboxes'][~ignored], fields['gt_bboxes_labels'][~ignored])
            sample.ignored_instances = _instances(fields['gt_bboxes'][ignored], fields['gt_bboxes_labels'][ignored])
        sample.set_metainfo({k: results[k] for k in self.meta_keys if k in results})
        return {'inputs': inputs, 'data_samples': sample}

    def __repr__(self) -> str:
        return f'{type(self).__name__}(meta_keys={self.meta_keys})'
