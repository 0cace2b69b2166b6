"""torch-pruning rules for layers it does not know, given to every dependency graph the pruner builds.

Why: torch-pruning gives an unknown layer its generic element-wise rule, which passes channel indices through but
never slices the layer's buffers. ``torchvision.ops.misc.FrozenBatchNorm2d`` (the frozen BN of the detection
presets, whose affine and statistics are buffers) would keep its old width and the pruned network would fail;
with the rule below it is sliced like a BatchNorm (input and output channels are the same channels).
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn
from torchvision.ops.misc import FrozenBatchNorm2d

from .prune_base import torch_pruning

tp = torch_pruning()  # imported only by the pruning functions, once they have the package


class FrozenBatchNormPruner(tp.pruner.function.BasePruningFunc):
    """Slices a ``FrozenBatchNorm2d``'s four per-channel buffers (``weight``, ``bias``, ``running_mean``,
    ``running_var``, each float ``[C]``) to the kept channels."""

    TARGET_MODULES = FrozenBatchNorm2d

    def prune_out_channels(self, layer: nn.Module, idxs: Sequence[int]) -> nn.Module:
        """Remove channels ``idxs`` (input and output alike) from ``layer`` in place; returns it."""
        removed = set(int(i) for i in idxs)
        keep = [i for i in range(layer.weight.shape[0]) if i not in removed]
        for name in ("weight", "bias", "running_mean", "running_var"):
            layer._buffers[name] = layer._buffers[name][keep].contiguous()
        return layer

    prune_in_channels = prune_out_channels  # one set of channels: pruning either end prunes both

    def get_out_channels(self, layer: nn.Module) -> int:
        return int(layer.weight.shape[0])

    get_in_channels = get_out_channels


def custom_pruners() -> dict[type, tp.pruner.function.BasePruningFunc]:
    """``{layer class: rule}`` for ``customized_pruners=`` of torch-pruning's graph and pruners."""
    return {FrozenBatchNorm2d: FrozenBatchNormPruner()}
