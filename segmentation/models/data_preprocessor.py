"""Batch assembly on the model's device: the core image batching plus label-map padding for training."""

from __future__ import annotations

from typing import Any

import torch
from mmengine.structures import PixelData

from oars.models.data_preprocessor import ImageDataPreprocessor
from segmentation.registry import MODELS
from segmentation.structures import SegDataSample


@MODELS.register_module()
class SegDataPreprocessor(ImageDataPreprocessor):
    """uint8 [3, H, W] images (a list, as ``pseudo_collate`` gives, or a stacked tensor) -> one float batch.

    Images are moved to the device first (so the float conversion and normalisation run there), turned
    BGR->RGB if ``bgr_to_rgb``, normalised with ``mean``/``std`` (None: no normalisation), and padded at
    the bottom/right with ``pad_val`` to the largest image in the batch, at least ``size`` (H, W), rounded
    up to a multiple of ``size_divisor`` (all of this is :class:`oars.models.ImageDataPreprocessor`).
    In training, each sample's ``gt_sem_seg`` (when present) is padded the same way with ``seg_pad_val``
    (the loss's ignore index), keeping its narrow dtype (uint8 from ``PackSegInputs``; widened to long only
    when ``seg_pad_val`` does not fit; the segmentor casts to long).
    Metainfo gains ``batch_input_shape`` and ``pad_shape`` (and ``img_shape`` when the pipeline did not set it).
    """

    def __init__(self, seg_pad_val: int = 255, **kwargs) -> None:
        super().__init__(**kwargs)
        self.seg_pad_val = seg_pad_val

    def forward(self, data: dict, training: bool = False) -> dict[str, Any]:
        """``{'inputs': images, 'data_samples': samples or None}`` -> same keys, batched on the device."""
        out = super().forward(data, training)
        samples: list[SegDataSample] | None = out["data_samples"]
        # Only training labels are padded to the batch: at test time the label stays at the
        # original image size (the metric compares there), as in mmseg's test pipelines.
        if training and samples is not None:
            shape = tuple(out["inputs"].shape[-2:])
            for sample in samples:
                if "gt_sem_seg" in sample:
                    sample.gt_sem_seg = PixelData(data=self._pad_seg(sample.gt_sem_seg.data, shape, sample))
        return out

    def _pad_seg(self, seg: torch.Tensor, shape: tuple[int, int], sample: SegDataSample) -> torch.Tensor:
        if seg.dim() == 2:
            seg = seg.unsqueeze(0)
        sh, sw = seg.shape[-2:]
        if sh > shape[0] or sw > shape[1]:
            raise ValueError(
                f"SegDataPreprocessor: label map of {sample.metainfo.get('seg_map_path', 'a sample')} has shape "
                f"{tuple(seg.shape)}, larger than the padded batch {shape}; image and label must match in size"
            )
        if not seg.dtype.is_floating_point and seg.dtype != torch.bool:
            info = torch.iinfo(seg.dtype)
            if not info.min <= self.seg_pad_val <= info.max:
                seg = seg.long()  # labels arrive narrow (uint8) from the workers; widen only when needed
        out = seg.new_full((seg.shape[0], *shape), self.seg_pad_val)
        out[:, :sh, :sw] = seg
        return out
