"""Checks and tensors every segmentation loss shares (loss names, class weights, the valid-pixel mask)."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def check_loss_name(owner: str, loss_name: str) -> str:
    """``loss_name`` unchanged, or ValueError: mmengine's ``parse_losses`` sums only keys containing 'loss'."""
    if "loss" not in loss_name:
        raise ValueError(f"{owner} loss_name={loss_name!r} must contain 'loss' so mmengine sums it into the total")
    return loss_name


def check_loss_weight(owner: str, loss_weight: float) -> float:
    """``loss_weight`` as a float; ValueError for a negative one (a negative weight maximises the loss)."""
    loss_weight = float(loss_weight)
    if loss_weight < 0:
        raise ValueError(f"{owner} loss_weight must be >= 0, got {loss_weight}")
    return loss_weight


def class_weight_tensor(
    owner: str, class_weight: Sequence[float] | None, key: str = "class_weight"
) -> torch.Tensor | None:
    """A config's per-class weights (the argument ``key``) as a float32 [C] tensor (None stays None);
    ValueError for an empty list or negative weights."""
    if class_weight is None:
        return None
    weight = torch.as_tensor(class_weight, dtype=torch.float32).flatten()
    if weight.numel() == 0 or bool((weight < 0).any()):
        raise ValueError(f"{owner} {key} must be a non-empty list of weights >= 0, got {list(class_weight)}")
    return weight


def match_class_weight(owner: str, weight: torch.Tensor | None, logits: torch.Tensor) -> torch.Tensor | None:
    """``weight`` [C] in the logits' dtype, or ValueError when its length is not the logits' class count."""
    if weight is None:
        return None
    num_classes = logits.shape[1]
    if weight.numel() != num_classes:
        raise ValueError(
            f"{owner} class_weight has {weight.numel()} values but the logits have {num_classes} classes"
        )
    return weight.to(logits.dtype)


def check_logits_target(owner: str, logits: torch.Tensor, target: torch.Tensor) -> None:
    """ValueError unless ``logits`` is [B, C, H, W] and ``target`` [B, H, W] of the same B, H, W."""
    if logits.dim() != 4 or target.shape != (logits.shape[0], *logits.shape[2:]):
        raise ValueError(
            f"{owner} expects logits [B, C, H, W] and target [B, H, W] class ids, got logits "
            f"{tuple(logits.shape)} and target {tuple(target.shape)}"
        )


def safe_target(target: torch.Tensor, ignore_index: int, num_classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(target with ignored pixels set to class 0, int64 [B, H, W]; valid mask, bool [B, H, W]).

    Ignored pixels get a real class id so that ``gather``/``one_hot`` can index with them; every caller
    multiplies their contribution by the mask afterwards. Other ids >= ``num_classes`` are left as they are,
    so indexing with them fails as in ``F.cross_entropy`` (the label loader has checked them against the classes).
    """
    target = target.long()
    valid = target != ignore_index
    return target.masked_fill(~valid, 0), valid



def sum_ratio(numerator: torch.Tensor, denominator: torch.Tensor | float) -> torch.Tensor:
    """``numerator.sum() / denominator.sum()`` summed in at least float32; 0 (still in the graph) when the
    denominator is 0 (every pixel ignored).

    Why float32: a half-precision sum of a per-pixel loss over a 512x1024 batch passes 65504 and turns into
    inf / NaN; the per-pixel values themselves are fine in half.
    """
    dtype = torch.promote_types(numerator.dtype, torch.float32)
    total = numerator.to(dtype).sum()
    denom = denominator.to(dtype).sum() if isinstance(denominator, torch.Tensor) else torch.tensor(
        float(denominator), dtype=dtype, device=numerator.device)
    return total / denom.clamp(min=1e-12)
