"""From a test batch and the model's outputs to each clip's frames, labels and strip (shared by the hooks)."""

from __future__ import annotations

import os.path as osp
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from video.evaluation.fields import gt_class_ids, has_gt, pred_scores, sample_name
from video.visualization import draw_clip_strip, first_view_frames


def batch_inputs(data_batch: Any, size: int) -> list[Any]:
    """Each sample's ``inputs`` from a collated test batch: a list (mmengine's ``pseudo_collate``) or a stacked
    tensor (``default_collate``) of uint8 frames; ``None`` per sample for feature inputs (dicts) or no batch."""
    inputs = data_batch.get('inputs') if isinstance(data_batch, dict) else None
    if isinstance(inputs, torch.Tensor) and inputs.shape[0] == size:
        return list(inputs)
    if isinstance(inputs, list | tuple) and len(inputs) == size:
        return [x if isinstance(x, torch.Tensor | np.ndarray) else None for x in inputs]
    return [None] * size


def clip_frames(sample: Any, inputs: Any) -> np.ndarray | None:
    """The first view's uint8 BGR frames [T, H, W, 3] of a sample, or None without frame inputs."""
    if inputs is None:
        return None
    return first_view_frames(inputs, int(sample.metainfo.get('num_crops', 1) or 1))


def clip_labels(sample: Any) -> tuple[np.ndarray, list[int] | None]:
    """(float32 scores [C], true class ids or None when the sample has no ``gt_label``)."""
    scores = pred_scores(sample, 'video pictures')
    true_ids = gt_class_ids(torch.as_tensor(sample.gt_label), scores.shape[0]) if has_gt(sample) else None
    return scores, true_ids


def clip_title(sample: Any) -> str:
    """The clip's file name (its folder for raw frames) for captions."""
    name = sample_name(sample)
    return osp.basename(name.rstrip('/\\')) or name


def clip_strip(sample: Any, frames: np.ndarray | None, class_names: Sequence[str], topk: int = 3,
               max_frames: int = 8, frame_height: int = 96) -> np.ndarray:
    """``draw_clip_strip`` of one predicted sample."""
    scores, true_ids = clip_labels(sample)
    return draw_clip_strip(frames, scores, true_ids, class_names, topk=topk, max_frames=max_frames,
                           frame_height=frame_height, title=clip_title(sample))
