"""TSN / TSM heads: per-frame features -> spatial average -> segmental consensus over T -> dropout -> fc."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from video.registry import MODELS, TASK_UTILS

from .base import BaseHead


@MODELS.register_module()
class TSNHead(BaseHead):
    """The head of Temporal Segment Networks (Wang et al. 2016).

    Args:
        consensus: a ``TASK_UTILS`` config folding the T segments of a view (default ``AvgConsensus`` over dim 1).
        The rest: see :class:`BaseHead` (defaults dropout 0.4, init_std 0.01, MMAction2's).

    ``forward(x, num_segs)``: float [N*T, C, h, w] (or [N*T, C]) features of N views of ``num_segs`` = T frames
    -> float [N, num_classes] logits. The consensus is taken before ``fc_cls``; for the average (a linear map)
    that equals averaging the per-frame scores.
    """

    def __init__(self, num_classes: int, in_channels: int, consensus: dict[str, Any] | nn.Module | None = None,
                 dropout_ratio: float = 0.4, init_std: float = 0.01, **kwargs: Any) -> None:
        super().__init__(num_classes, in_channels, dropout_ratio=dropout_ratio, init_std=init_std, **kwargs)
        consensus = dict(type="AvgConsensus", dim=1) if consensus is None else consensus
        self.consensus = consensus if isinstance(consensus, nn.Module) else TASK_UTILS.build(consensus)
        self.avg_pool = nn.AdaptiveAvgPool2d(1)

    def forward(self, x: torch.Tensor, num_segs: int = 1) -> torch.Tensor:
        if x.dim() == 4:
            x = self.avg_pool(x).flatten(1)
        if x.dim() != 2 or x.shape[0] % num_segs:
            raise ValueError(f"{type(self).__name__}: features {tuple(x.shape)} are not [N*T, C(, h, w)] with "
                             f"T={num_segs}")
        x = self.consensus(x.reshape(-1, num_segs, x.shape[1])).squeeze(1)
        return self.fc_cls(self.dropout(x))


@MODELS.register_module()
class TSMHead(TSNHead):
    """The head of the Temporal Shift Module (Lin et al. 2019): :class:`TSNHead` with TSM's defaults
    (dropout 0.5, init_std 0.001, as MMAction2's TSM-R50 configs); ``num_segs`` is the backbone's
    ``num_segments``."""

    def __init__(self, num_classes: int, in_channels: int, dropout_ratio: float = 0.5, init_std: float = 0.001,
                 **kwargs: Any) -> None:
        super().__init__(num_classes, in_channels, dropout_ratio=dropout_ratio, init_std=init_std, **kwargs)
