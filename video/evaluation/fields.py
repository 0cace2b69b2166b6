"""Reading a clip's ``pred_score`` and ``gt_label`` from what the Evaluator hands a metric.

The Evaluator passes ``ActionDataSample.to_dict()`` (plain dicts); hooks get the samples themselves. Both work.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch


def _get(sample: Any, key: str) -> Any:
    if isinstance(sample, dict):
        return sample.get(key)
    return getattr(sample, key, None) if key in sample else None


def sample_name(sample: Any) -> str:
    """The clip's ``filename`` (video or feature file) or ``frame_dir`` (raw frames) metainfo, or ``'?'``: for
    error messages and captions."""
    for key in ('filename', 'frame_dir'):
        name = _get(sample, key)
        if name is not None:
            return str(name)
    return '?'


def pred_scores(sample: Any, where: str) -> np.ndarray:
    """``pred_score`` as float32 [C]; a clear error when the model's predict mode did not set it."""
    score = _get(sample, 'pred_score')
    if score is None:
        raise KeyError(f"{where}: a data sample ({sample_name(sample)}) has no 'pred_score'; the recognizer's "
                       "predict mode must fill pred_score [num_classes]")
    arr = (score.detach().cpu() if isinstance(score, torch.Tensor) else torch.as_tensor(score)).float().numpy()
    if arr.ndim != 1:
        arr = arr.reshape(-1)
    return arr


def has_gt(sample: Any) -> bool:
    """Whether the sample carries ``gt_label`` (a test pipeline without labels does not)."""
    return _get(sample, 'gt_label') is not None


def gt_label(sample: Any, where: str) -> torch.Tensor:
    """``gt_label`` as a CPU tensor: LongTensor [1] (single-label) or FloatTensor [C] (multi-hot)."""
    label = _get(sample, 'gt_label')
    if label is None:
        raise KeyError(f"{where}: a data sample ({sample_name(sample)}) has no 'gt_label'; the test pipeline's "
                       'PackActionInputs sets it from the annotation list')
    return torch.as_tensor(label).detach().cpu()


def gt_class_ids(label: torch.Tensor, num_classes: int) -> list[int]:
    """Class ids of a ``gt_label``: ``[id]`` for a single label, the positive entries of a multi-hot [C]."""
    if label.is_floating_point() and label.numel() == num_classes and num_classes > 1:
        return torch.nonzero(label > 0.5).reshape(-1).tolist()
    return [int(v) for v in label.reshape(-1).tolist()]


def class_names(dataset_meta: dict | None, num_classes: int, where: str) -> list[str]:
    """``dataset_meta['classes']`` (checked against the score width) or ``'0'..'C-1'`` when there is none."""
    classes: Sequence[str] | None = (dataset_meta or {}).get('classes')
    if not classes:
        return [str(i) for i in range(num_classes)]
    if len(classes) != num_classes:
        raise ValueError(f"{where}: the model scores {num_classes} classes but dataset_meta['classes'] names "
                         f'{len(classes)}; num_classes on the model must match the dataset')
    return [str(c) for c in classes]
