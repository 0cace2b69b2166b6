"""Validity masks of padded frame-feature sequences: checking a batch, softmax over valid frames only, and
per-modality arguments.

A feature batch (what ``ActionDataPreprocessor`` makes of ``PackFeatureInputs`` samples) is a dict
``modality -> FloatTensor [B, T, D]`` plus ``mask``: BoolTensor (or 0/1 float) [B, T], True on the valid
frames. Valid frames come first (``num_frames`` of each sample, then padding), which is what
:func:`reverse_valid` relies on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

import torch
from torch import Tensor

T = TypeVar("T")

MASK_KEY = "mask"


def per_modality(owner: str, name: str, value: T | Mapping[str, T], modalities: Sequence[str]) -> dict[str, T]:
    """Expand ``value`` to one entry per modality: a single value serves every modality, a mapping must name
    exactly ``modalities``.

    Raises:
        ValueError: a mapping whose keys differ from ``modalities``; the message names ``owner`` and ``name``.
    """
    if isinstance(value, Mapping):
        if set(value) != set(modalities):
            raise ValueError(f"{owner}: {name}={dict(value)!r} must give a value for each modality "
                             f"{list(modalities)} (or one value for all)")
        return {m: value[m] for m in modalities}
    return {m: value for m in modalities}


def check_feature_dims(owner: str, feature_dims: Mapping[str, int]) -> dict[str, int]:
    """Validate ``feature_dims`` (modality -> feature width, e.g. ``{rgb: 1024, audio: 128}``)."""
    if not isinstance(feature_dims, Mapping) or not feature_dims:
        raise ValueError(f"{owner}: feature_dims={feature_dims!r} must be a non-empty mapping modality -> width, "
                         "e.g. {rgb: 1024, audio: 128}")
    bad = {k: v for k, v in feature_dims.items() if k == MASK_KEY or not isinstance(v, int) or v < 1}
    if bad:
        raise ValueError(f"{owner}: feature_dims entries {bad!r} are invalid; expected positive int widths under "
                         f"modality names other than {MASK_KEY!r}")
    return dict(feature_dims)


def split_batch(owner: str, inputs: Mapping[str, Tensor], feature_dims: Mapping[str, int],
                mask: Tensor | None = None) -> tuple[dict[str, Tensor], Tensor]:
    """Check a feature batch against ``feature_dims`` and return (features, mask).

    Args:
        inputs: modality -> FloatTensor [B, T, D]; may also hold ``mask`` (used when ``mask`` is None).
        feature_dims: the modalities the model was built for and their widths D.
        mask: [B, T] bool or 0/1 tensor of valid frames; None (and no ``inputs['mask']``): every frame valid.

    Returns:
        features: modality -> float [B, T, D] with padded frames set to 0 (their values, NaN included, can then
        reach no output); mask: BoolTensor [B, T].

    Raises:
        ValueError: a missing modality, a width other than ``feature_dims``, or batch/length/mask shapes that
            disagree; the message names the modality and the shapes.
    """
    if not isinstance(inputs, Mapping):
        raise ValueError(f"{owner}: inputs must be a dict modality -> [B, T, D] tensor (plus '{MASK_KEY}'), "
                         f"got {type(inputs).__name__}")
    missing = [m for m in feature_dims if m not in inputs]
    if missing:
        raise ValueError(f"{owner}: inputs lack modalities {missing}; got keys {sorted(inputs)}; the model was "
                         f"built for {list(feature_dims)}")
    if mask is None:
        mask = inputs.get(MASK_KEY)
    first = inputs[next(iter(feature_dims))]
    if first.dim() != 3:
        raise ValueError(f"{owner}: inputs[{next(iter(feature_dims))!r}] has shape {tuple(first.shape)}; "
                         "expected [B, T, D]")
    b, t = first.shape[:2]
    for m, d in feature_dims.items():
        x = inputs[m]
        if x.dim() != 3 or x.shape[0] != b or x.shape[1] != t or x.shape[2] != d:
            raise ValueError(f"{owner}: inputs[{m!r}] has shape {tuple(x.shape)}; expected [{b}, {t}, {d}] "
                             "(all modalities share B and T; D from feature_dims)")
    if mask is None:
        mask = torch.ones(b, t, dtype=torch.bool, device=first.device)
    elif tuple(mask.shape) != (b, t):
        raise ValueError(f"{owner}: {MASK_KEY} has shape {tuple(mask.shape)}; expected [B, T] = [{b}, {t}]")
    mask = mask.to(device=first.device, dtype=torch.bool)
    keep = mask.unsqueeze(-1)
    feats = {m: torch.where(keep, inputs[m], torch.zeros((), dtype=inputs[m].dtype, device=first.device))
             for m in feature_dims}
    return feats, mask


def masked_softmax(scores: Tensor, mask: Tensor, dim: int = 1) -> Tensor:
    """Softmax of ``scores`` over ``dim`` among the entries where ``mask`` is True; masked entries get exactly
    0, and a row with no valid entry is all 0 (not NaN).

    Args:
        scores: float tensor, e.g. [B, T] or [B, T, K].
        mask: bool tensor broadcastable to ``scores``.
        dim: the dimension the weights sum to 1 over.

    Returns:
        float tensor shaped as ``scores``: non-negative weights summing to 1 over the valid entries of ``dim``.
    """
    lowest = torch.finfo(scores.dtype).min
    weights = torch.softmax(scores.masked_fill(~mask, lowest), dim=dim)
    return weights * mask.to(scores.dtype)


def valid_lengths(mask: Tensor) -> Tensor:
    """Number of valid frames per sample: LongTensor [B] from a bool mask [B, T]."""
    return mask.sum(dim=1)


def reverse_valid(x: Tensor, lengths: Tensor) -> Tensor:
    """Reverse each sequence's first ``lengths[b]`` steps in place of order, leaving the padding where it is.

    Used to run the backward direction of a bidirectional RNN from each sample's last VALID frame (vectorised
    and exportable, unlike ``pack_padded_sequence``); applying it twice restores ``x``.

    Args:
        x: [B, T, D] tensor.
        lengths: LongTensor [B], 0 <= lengths <= T.

    Returns:
        [B, T, D]: ``out[b, t] = x[b, lengths[b] - 1 - t]`` for ``t < lengths[b]``, else ``x[b, t]``.
    """
    t = torch.arange(x.shape[1], device=x.device).unsqueeze(0)
    lengths = lengths.unsqueeze(1)
    index = torch.where(t < lengths, lengths - 1 - t, t)
    return torch.gather(x, 1, index.unsqueeze(-1).expand(-1, -1, x.shape[2]))
