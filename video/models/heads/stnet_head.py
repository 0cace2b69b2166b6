"""StNet's head: the temporal Xception block over the segments of each view, max over time, and the classifier
(He et al., AAAI 2019; PaddleVideo's ``xception`` + ``fc``)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from video.registry import MODELS

from .base import BaseHead


class TemporalXception(nn.Module):
    """Separable 1D convolutions over time on per-segment feature vectors.

    ``bn_in`` -> depthwise 3-tap conv ``dw1`` -> pointwise ``pw1`` to ``mid_channels`` -> BN + ReLU -> depthwise
    ``dw2`` -> pointwise ``pw2``; a pointwise ``shortcut`` from ``bn_in``'s output is added; then ``bn_out`` and
    ReLU (PaddleVideo's layout; convolutions have biases).

    ``forward``: float [N, in_channels, T] -> float [N, mid_channels, T].
    """

    def __init__(self, in_channels: int, mid_channels: int = 1024) -> None:
        super().__init__()
        self.bn_in = nn.BatchNorm1d(in_channels)
        self.dw1 = nn.Conv1d(in_channels, in_channels, 3, padding=1, groups=in_channels)
        self.pw1 = nn.Conv1d(in_channels, mid_channels, 1)
        self.bn_mid = nn.BatchNorm1d(mid_channels)
        self.dw2 = nn.Conv1d(mid_channels, mid_channels, 3, padding=1, groups=mid_channels)
        self.pw2 = nn.Conv1d(mid_channels, mid_channels, 1)
        self.shortcut = nn.Conv1d(in_channels, mid_channels, 1)
        self.bn_out = nn.BatchNorm1d(mid_channels)
        for m in self.modules():
            if isinstance(m, nn.Conv1d):
                nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
                nn.init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tensor:
        x = self.bn_in(x)
        branch = self.pw2(self.dw2(torch.relu(self.bn_mid(self.pw1(self.dw1(x))))))
        return torch.relu(self.bn_out(branch + self.shortcut(x)))


@MODELS.register_module()
class StNetHead(BaseHead):
    """Spatial average of each segment's map, :class:`TemporalXception` over the T segments, max over T, and
    ``fc_cls`` (from ``mid_channels``; uniform(+-1/sqrt(in_channels)) weights as PaddleVideo).

    Args:
        num_classes, in_channels: given by the recognizer (``in_channels`` = the backbone's 2048 for ResNet-50).
        mid_channels: width of the Xception block and of the classifier's input (PaddleVideo 1024).
        dropout_ratio: dropout before ``fc_cls`` (PaddleVideo: none, the default 0).
        The rest (loss_cls, multi_label, average_clips): see :class:`BaseHead`.

    ``forward(x, num_segs)``: :class:`~video.models.backbones.stnet.StNet`'s float [N, C, T, h, w] (or already
    pooled [N, C, T]) for N views -> float [N, num_classes] logits; ``num_segs`` (the recognizer's frames per
    view) is not needed, the segments are the time axis of ``x``.

    Real size: ``in_channels=2048, mid_channels=1024``, 400 classes: about 5.7 M parameters (fc 0.41 M).
    """

    def __init__(self, num_classes: int, in_channels: int, mid_channels: int = 1024, dropout_ratio: float = 0.0,
                 **kwargs: Any) -> None:
        super().__init__(num_classes, in_channels, dropout_ratio=dropout_ratio, **kwargs)
        if not isinstance(mid_channels, int) or mid_channels < 1:
            raise ValueError(f"StNetHead: mid_channels must be a positive int, got {mid_channels!r}")
        self.mid_channels = mid_channels
        self.xception = TemporalXception(in_channels, mid_channels)
        self.fc_cls = nn.Linear(mid_channels, num_classes)
        bound = 1.0 / math.sqrt(in_channels)
        nn.init.uniform_(self.fc_cls.weight, -bound, bound)
        nn.init.zeros_(self.fc_cls.bias)

    def forward(self, x: Tensor, num_segs: int = 1) -> Tensor:
        if x.dim() == 5:
            x = x.mean(dim=(3, 4))
        if x.dim() != 3 or x.shape[1] != self.in_channels:
            raise ValueError(f"StNetHead: features {tuple(x.shape)} are not [N, {self.in_channels}, T(, h, w)] "
                             "(StNet's output: segments as the time axis)")
        x = self.xception(x).amax(dim=2)
        return self.fc_cls(self.dropout(x))
