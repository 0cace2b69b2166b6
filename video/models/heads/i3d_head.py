"""Head of 3D-conv recognizers (I3D, R(2+1)D, ...): spatio-temporal average pool -> dropout -> fc."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from video.registry import MODELS

from .base import BaseHead


@MODELS.register_module()
class I3DHead(BaseHead):
    """Global 3D average pooling and a linear classifier (torchvision's video ResNet head: ``avgpool`` + ``fc``).

    Args: see :class:`BaseHead` (defaults dropout 0.5, init_std 0.01, as MMAction2's I3DHead).

    ``forward(x)``: float [N, C, t, h, w] features of N views -> float [N, num_classes] logits.
    """

    def __init__(self, num_classes: int, in_channels: int, dropout_ratio: float = 0.5, init_std: float = 0.01,
                 **kwargs: Any) -> None:
        super().__init__(num_classes, in_channels, dropout_ratio=dropout_ratio, init_std=init_std, **kwargs)
        self.avg_pool = nn.AdaptiveAvgPool3d(1)

    def forward(self, x: torch.Tensor, num_segs: int = 1) -> torch.Tensor:
        if x.dim() != 5:
            raise ValueError(f"{type(self).__name__}: features must be [N, C, t, h, w], got {tuple(x.shape)}")
        return self.fc_cls(self.dropout(self.avg_pool(x).flatten(1)))
