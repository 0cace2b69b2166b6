"""Batch assembly on the model's device: normalise, pad and stack images and label maps."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from mmengine.model import BaseDataPreprocessor
from mmengine.structures import PixelData

from segmentation.registry import MODELS
from segmentation.structures import SegDataSample


@MODELS.register_module()
class SegDataPreprocessor(BaseDataPreprocessor):
    """uint8 [3, H, W] images (a list, as ``pseudo_collate`` gives, or a stacked tensor) -> one float batch.

    Images are moved to the device first (so the float conversion and normalisation run there), turned
    BGR->RGB if ``bgr_to_rgb``, normalised with ``mean``/``std`` (None: no normalisation), and padded at
    the bottom/right with ``pad_val`` to the largest image in the batch, at least ``size`` (H, W), rounded
    up to a multiple of ``size_divisor``. Each sample's ``gt_sem_seg`` (when present) is padded the same way
    with ``seg_pad_val`` (the loss's ignore index), keeping its narrow dtype (uint8 from ``PackSegInputs``;
    widened to long only when ``seg_pad_val`` does not fit; the segmentor casts to long).
    Metainfo gains ``batch_input_shape`` and ``pad_shape`` (and ``img_shape`` when the pipeline did not set it).
    """

    def __init__(
        self,
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
        bgr_to_rgb: bool = False,
        size: Sequence[int] | None = None,
        size_divisor: int | None = None,
        pad_val: float = 0,
        seg_pad_val: int = 255,
        non_blocking: bool = False,
    ) -> None:
        super().__init__(non_blocking)
        if (mean is None) != (std is None):
            raise ValueError(f"SegDataPreprocessor: give both mean and std or neither, got mean={mean}, std={std}")
        if mean is not None:
            if len(mean) not in (1, 3) or len(std) not in (1, 3):
                raise ValueError(
                    f"SegDataPreprocessor: mean and std need 1 or 3 values, got mean={list(mean)}, std={list(std)}"
                )
            if any(s <= 0 for s in std):
                raise ValueError(f"SegDataPreprocessor: std values must be > 0, got {list(std)}")
            self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32).view(-1, 1, 1), persistent=False)
            self.register_buffer("std", torch.tensor(std, dtype=torch.float32).view(-1, 1, 1), persistent=False)
        else:
            self.mean = self.std = None
        if size is not None and (len(size) != 2 or min(size) < 1):
            raise ValueError(f"SegDataPreprocessor: size must be (H, W) with positive values, got {size!r}")
        if size_divisor is not None and size_divisor < 1:
            raise ValueError(f"SegDataPreprocessor: size_divisor must be >= 1, got {size_divisor}")
        self.bgr_to_rgb = bgr_to_rgb
        self.size = None if size is None else (int(size[0]), int(size[1]))
        self.size_divisor = size_divisor
        self.pad_val = pad_val
        self.seg_pad_val = seg_pad_val

    def _target_shape(self, shapes: list[tuple[int, int]]) -> tuple[int, int]:
        h = max(s[0] for s in shapes)
        w = max(s[1] for s in shapes)
        if self.size is not None:
            h, w = max(h, self.size[0]), max(w, self.size[1])
        if self.size_divisor:
            d = self.size_divisor
            h, w = math.ceil(h / d) * d, math.ceil(w / d) * d
        return h, w

    def forward(self, data: dict, training: bool = False) -> dict[str, Any]:
        """``{'inputs': images, 'data_samples': samples or None}`` -> same keys, batched on the device."""
        if not isinstance(data, dict) or "inputs" not in data:
            raise TypeError(f"SegDataPreprocessor expects a dict with an 'inputs' key, got {type(data).__name__}")
        data = self.cast_data(data)
        images = data["inputs"]
        if isinstance(images, torch.Tensor):
            if images.dim() != 4:
                raise ValueError(
                    f"SegDataPreprocessor: a stacked input must be [B, C, H, W], got {tuple(images.shape)}"
                )
            images = list(images)
        samples: list[SegDataSample] | None = data.get("data_samples")
        if samples is not None and len(samples) != len(images):
            raise ValueError(f"SegDataPreprocessor: {len(images)} images but {len(samples)} data samples")
        channels = None if self.mean is None else self.mean.shape[0]
        for i, img in enumerate(images):
            if img.dim() != 3 or (channels == 3 and img.shape[0] != 3):
                raise ValueError(
                    f"SegDataPreprocessor: image {i} has shape {tuple(img.shape)}, expected [3, H, W] (channels first)"
                )
        shapes = [tuple(img.shape[-2:]) for img in images]
        h, w = self._target_shape(shapes)
        batch = images[0].new_full((len(images), images[0].shape[0], h, w), self.pad_val, dtype=torch.float32)
        for i, img in enumerate(images):
            img = img[[2, 1, 0]] if self.bgr_to_rgb else img
            img = img.float()
            if self.mean is not None:
                img = (img - self.mean) / self.std
            batch[i, :, : img.shape[1], : img.shape[2]] = img
        if samples is not None:
            for sample, shape in zip(samples, shapes):
                sample.set_metainfo(dict(batch_input_shape=(h, w), pad_shape=(h, w)))
                if "img_shape" not in sample.metainfo:
                    sample.set_metainfo(dict(img_shape=shape))
                if "ori_shape" not in sample.metainfo:
                    sample.set_metainfo(dict(ori_shape=shape))
                # Only training labels are padded to the batch: at test time the label stays at the
                # original image size (the metric compares there), as in mmseg's test pipelines.
                if training and "gt_sem_seg" in sample:
                    sample.gt_sem_seg = PixelData(data=self._pad_seg(sample.gt_sem_seg.data, (h, w), sample))
        return dict(inputs=batch, data_samples=samples)

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
