"""Segmental consensus: fold the per-segment scores of one view into one (TSN, Wang et al. 2016, eq. 1).

Registered in ``TASK_UTILS`` so a config swaps the consensus of a head (``consensus: {type: MaxConsensus}``)
without touching the head.
"""

from __future__ import annotations

import torch
from torch import nn

from video.registry import TASK_UTILS


class _Consensus(nn.Module):
    def __init__(self, dim: int = 1) -> None:
        super().__init__()
        if not isinstance(dim, int) or isinstance(dim, bool):
            raise ValueError(f"{type(self).__name__}: dim must be an int, got {dim!r}")
        self.dim = dim

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


@TASK_UTILS.register_module()
class AvgConsensus(_Consensus):
    """Mean over the segment axis.

    Args:
        dim: the segment axis.

    ``forward(x)``: float [N, T, ...] -> [N, 1, ...] (the axis kept, as MMAction2's, so a head squeezes it once).
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=self.dim, keepdim=True)


@TASK_UTILS.register_module()
class MaxConsensus(_Consensus):
    """Maximum over the segment axis (TSN's "max pooling" consensus); same shapes as :class:`AvgConsensus`."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.amax(dim=self.dim, keepdim=True)
