"""Automatic pruning's model side: the prunable layers grouped (one search token per group), a ratio vector applied
with the pruning primitive (:func:`oars.compress.prune.prune_copy`: torch-pruning's dependency graph, per-layer
ratios), and BatchNorm re-calibration for the cheap proxy score.

Why groups: one token per layer would make the search vector long (a ResNet-50 has 50+ convolutions) and the search
slow to converge; PaddleSlim's AutoPruner searches one ratio per layer of a short list. Layers are grouped by their
module path (``backbone.encoder.0``, ``backbone.decoder.1.conv`` ...): the deepest level of the module tree that
still gives at most ``max_groups`` groups, so the groups follow the model's stages and blocks whatever the task.
A layer's ratio prunes its dependency group (layers coupled through additions keep the same channels); when a
coupled group spans two token groups, torch-pruning takes the ratio of the group's first layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from oars.errors import OarsError

from .measure import ForwardFn, tensor_forward
from .prune import LossFn, PruneSettings, prune_copy, scope_layers
from .prune_base import torch_pruning


@dataclass(frozen=True)
class LayerGroup:
    """One search token's layers: ``name`` (their common module path) and ``layers`` (conv/linear module paths)."""

    name: str
    layers: tuple[str, ...]


def prunable_groups(model: nn.Module, settings: PruneSettings, kept: Sequence[str] = (),
                    max_groups: int = 16) -> list[LayerGroup]:
    """The in-scope convolutions and linear layers pruning may narrow (not ignored, not ``kept``), grouped by the
    deepest module-path level that gives at most ``max_groups`` groups (the first level when even that gives more),
    in the model's order.

    Raises:
        OarsError: the scope holds no prunable layer.
    """
    tp = torch_pruning()
    _, ignored = scope_layers(model, settings, kept)
    skipped = set(map(id, ignored))
    paths = [n for n, m in model.named_modules()
             if isinstance(m, (tp.ops.TORCH_CONV, tp.ops.TORCH_LINEAR)) and id(m) not in skipped]
    if not paths:
        raise OarsError(f"compress.scope {settings.scope}: no layer of {type(model).__name__} can be pruned there "
                        f"(all are ignored or keep their width)")
    chosen = 1
    for depth in range(1, max(len(p.split(".")) for p in paths) + 1):
        if len({".".join(p.split(".")[:depth]) for p in paths}) > max_groups:
            break
        chosen = depth
    groups: dict[str, list[str]] = {}
    for path in paths:
        groups.setdefault(".".join(path.split(".")[:chosen]), []).append(path)
    return [LayerGroup(name, tuple(layers)) for name, layers in groups.items()]


def layer_ratios(groups: Sequence[LayerGroup], ratios: Sequence[float]) -> dict[str, float]:
    """``{layer path: ratio}`` of a ratio per group (groups with ratio 0 are left out: not pruned)."""
    if len(groups) != len(ratios):
        raise ValueError(f"{len(ratios)} ratios for {len(groups)} groups")
    return {layer: float(r) for g, r in zip(groups, ratios) if r > 0 for layer in g.layers}


def prune_groups(model: nn.Module, inputs: Any, settings: PruneSettings, groups: Sequence[LayerGroup],
                 ratios: Sequence[float], kept: Sequence[str] = (), forward_fn: ForwardFn = tensor_forward,
                 loss_fn: LossFn | None = None) -> nn.Module:
    """A pruned copy of ``model`` (left untouched): each group's layers pruned by its ratio (one torch-pruning step
    with per-layer ratios, capped at ``settings.max_layer_ratio``), the layers outside the groups not pruned."""
    pruned, _ = prune_copy(model, inputs, forward_fn, settings, 0.0, loss_fn, kept, layer_ratios(groups, ratios))
    return pruned.eval()


def recalibrate_bn(model: nn.Module, batches: Sequence[Any], forward_fn: ForwardFn = tensor_forward) -> nn.Module:
    """Re-estimate every BatchNorm's running statistics on ``batches`` (preprocessed inputs), in place.

    Why: pruning removes channels, so the statistics the next layers' BatchNorms recorded no longer describe their
    inputs; a pruned network scored with stale statistics ranks candidates by that damage rather than by what
    fine-tuning can recover. PaddleSlim's sensitivity analysis and AutoPruner score after the same re-estimation.
    The statistics become the plain average over the batches (``momentum=None``); nothing else changes (no
    gradients). Without batches the model is returned as it is. Returns ``model``, in eval mode.
    """
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats]
    if not batches or not norms:
        return model.eval()
    momenta = [m.momentum for m in norms]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    try:
        with torch.no_grad():
            for inputs in batches:
                forward_fn(model, inputs)
    finally:
        for m, momentum in zip(norms, momenta):
            m.momentum = momentum
        model.eval()
    return model


__all__ = ["LayerGroup", "layer_ratios", "prunable_groups", "prune_groups", "recalibrate_bn"]
