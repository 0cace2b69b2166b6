"""The recognizer of pre-extracted frame features (YouTube-8M style): a feature model from the registry, the
three mmengine modes, and the mask of valid frames."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from oars.models.task_model import TaskModel
from video.registry import MODELS
from video.structures import ActionDataSample

from ..data_preprocessor import ActionDataPreprocessor
from .base import FeatureHead
from .masking import MASK_KEY


def mask_from_samples(data_samples: Sequence[ActionDataSample] | None, batch: int, length: int,
                      device: torch.device) -> Tensor | None:
    """A [B, T] bool mask from the samples' ``num_frames`` metainfo (valid frames first), or None when the
    samples do not carry it."""
    if not data_samples or not all("num_frames" in s.metainfo for s in data_samples):
        return None
    counts = torch.as_tensor([int(s.metainfo["num_frames"]) for s in data_samples], device=device)
    if counts.numel() != batch:
        return None
    return torch.arange(length, device=device).unsqueeze(0) < counts.unsqueeze(1)


@MODELS.register_module()
class FeatureRecognizer(TaskModel):
    """Classify a batch of frame-feature sequences.

    ``inputs`` is a dict modality -> FloatTensor [B, T, D] with ``inputs['mask']`` (bool or 0/1 [B, T], True on
    valid frames) as ``ActionDataPreprocessor`` makes of ``PackFeatureInputs`` samples; without ``mask`` the
    samples' ``num_frames`` metainfo gives it, else every frame counts.

    Args:
        head: config of a feature model (:class:`AttentionLSTM`, :class:`AttentionCluster`, :class:`NeXtVLAD`
            or another :class:`FeatureHead`); ``num_classes`` and ``multi_label`` are passed to it.
        num_classes: classes C, written once here (a head stating another count is refused).
        multi_label: sigmoid scores and BCE (YouTube-8M) or softmax scores and cross-entropy.
        data_preprocessor: default ``ActionDataPreprocessor`` (pads the batch's sequences and makes ``mask``).
        init_cfg: as mmengine's ``BaseModel``.

    Modes: ``loss`` -> ``{'loss_cls'}``; ``predict`` -> data samples with ``pred_score`` [C] (sigmoid or
    softmax) and ``pred_label`` [1]; ``tensor`` -> scores [B, C] (what is exported).
    """

    def __init__(self, head: dict, num_classes: int, multi_label: bool = True,
                 data_preprocessor: dict | torch.nn.Module | None = None, init_cfg: dict | None = None) -> None:
        if data_preprocessor is None:
            data_preprocessor = ActionDataPreprocessor()
        elif isinstance(data_preprocessor, dict):
            data_preprocessor = MODELS.build(data_preprocessor)
        super().__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        if not isinstance(head, Mapping) or "type" not in head:
            raise ValueError(f"FeatureRecognizer: head={head!r} must be a config dict with a 'type'")
        for key, value in (("num_classes", num_classes), ("multi_label", multi_label)):
            if key in head and head[key] != value:
                raise ValueError(f"FeatureRecognizer: head.{key}={head[key]!r} differs from the model's "
                                 f"{key}={value!r}; write {key} once, on the model")
        self.head = MODELS.build(dict(head), default_args=dict(num_classes=num_classes, multi_label=multi_label))
        if not isinstance(self.head, FeatureHead):
            raise ValueError(f"FeatureRecognizer: head type {head['type']!r} is not a feature model "
                             "(AttentionLSTM, AttentionCluster, NeXtVLAD or another FeatureHead)")
        self.num_classes = num_classes
        self.multi_label = multi_label

    def _logits(self, inputs: Mapping[str, Tensor], data_samples: Sequence[ActionDataSample] | None) -> Tensor:
        mask = inputs.get(MASK_KEY) if isinstance(inputs, Mapping) else None
        if mask is None and isinstance(inputs, Mapping) and self.head.modalities[0] in inputs:
            first = inputs[self.head.modalities[0]]
            if first.dim() == 3:
                mask = mask_from_samples(data_samples, first.shape[0], first.shape[1], first.device)
        return self.head(inputs, mask)

    def loss(self, inputs: Mapping[str, Tensor], data_samples: Sequence[ActionDataSample]) -> dict[str, Tensor]:
        return self.head.loss(self._logits(inputs, data_samples), data_samples)

    def predict(self, inputs: Mapping[str, Tensor],
                data_samples: Sequence[ActionDataSample] | None = None) -> list[ActionDataSample]:
        return self.head.predict(self._logits(inputs, data_samples), data_samples)

    def _forward(self, inputs: Mapping[str, Tensor], data_samples: Any = None) -> Tensor:
        return self.head.scores(self._logits(inputs, data_samples))
