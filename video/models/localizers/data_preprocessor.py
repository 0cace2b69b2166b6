"""Batch assembly of fixed-length feature sequences for temporal localizers."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from mmengine.model import BaseDataPreprocessor

from video.registry import MODELS


@MODELS.register_module()
class LocalizationDataPreprocessor(BaseDataPreprocessor):
    """B feature sequences [C, T] (what ``PackLocalizationInputs`` gives, already resized to T positions) ->
    float32 [B, C, T] on the model's device. Sequences are never padded: the pipeline rescales every video to
    the localizer's T (BMN's 100), so a length mismatch is a pipeline error, reported as such."""

    def forward(self, data: dict, training: bool = False) -> dict:
        """``{'inputs': B tensors [C, T] or [B, C, T], 'data_samples': ...}`` -> the same keys, batched."""
        if not isinstance(data, dict) or "inputs" not in data:
            raise TypeError("LocalizationDataPreprocessor expects a dict with an 'inputs' key, got "
                            f"{type(data).__name__}")
        data = self.cast_data(data)
        inputs = data["inputs"]
        if isinstance(inputs, torch.Tensor):
            batch = inputs
        else:
            if not isinstance(inputs, Sequence) or not inputs:
                raise ValueError("LocalizationDataPreprocessor: 'inputs' must be a non-empty list of [C, T] tensors")
            shapes = sorted({tuple(x.shape) for x in inputs})
            if len(shapes) != 1:
                raise ValueError(f"LocalizationDataPreprocessor: feature sequences of one batch differ in shape "
                                 f"{shapes}; resize every video to the same temporal length in the pipeline")
            batch = torch.stack(list(inputs))
        if batch.dim() != 3:
            raise ValueError(f"LocalizationDataPreprocessor: expected features [B, C, T], got {tuple(batch.shape)}")
        return dict(inputs=batch.float(), data_samples=data.get("data_samples"))
