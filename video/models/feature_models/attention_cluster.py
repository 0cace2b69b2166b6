"""Attention Clusters (Long et al., "Attention Clusters: Purely Attention Based Local Feature Integration for
Video Classification", CVPR 2018; PaddleCV's ``AttentionCluster``)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from video.registry import MODELS

from .base import FeatureHead
from .masking import masked_softmax, per_modality


class ShiftingAttention(nn.Module):
    """``num_attention`` attention units over the valid frames of one modality, each followed by the shifting
    operation.

    Unit ``i`` scores every frame with a linear map, takes the softmax over the valid frames, pools the features
    with those weights, shifts the pooled vector by its own learnable scale and offset (``alpha_i * v + beta_i``,
    scalars), L2-normalises it and divides by ``sqrt(num_attention)``, so that the concatenation of the units
    has unit norm and each unit's output stays diverse (the paper's point: without the shift, units collapse
    onto the same frames).

    Args:
        in_dim: per-frame feature width D.
        num_attention: units in the cluster (PaddleCV ``cluster_nums`` 32).

    ``alpha`` and ``beta`` start as PaddleCV's: normal with std ``num_attention ** -0.25``.
    """

    def __init__(self, in_dim: int, num_attention: int) -> None:
        super().__init__()
        if not isinstance(num_attention, int) or num_attention < 1:
            raise ValueError(f"ShiftingAttention: num_attention={num_attention!r} must be a positive int")
        self.num_attention = num_attention
        self.score = nn.Linear(in_dim, num_attention)
        std = num_attention ** -0.25
        self.alpha = nn.Parameter(torch.randn(num_attention) * std)
        self.beta = nn.Parameter(torch.randn(num_attention) * std)
        self.out_channels = num_attention * in_dim

    def forward(self, x: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """Attend ``x`` [B, T, D] under ``mask`` (bool [B, T]).

        Returns:
            out: [B, num_attention * D], unit-major (unit 0's D values first);
            weights: [B, num_attention, T], each unit's softmax over the valid frames (0 on padding).
        """
        weights = masked_softmax(self.score(x), mask.unsqueeze(2), dim=1)  # [B, T, N]
        pooled = torch.einsum("btn,btd->bnd", weights, x)
        shifted = pooled * self.alpha[:, None] + self.beta[:, None]
        out = F.normalize(shifted, dim=2) / math.sqrt(self.num_attention)
        return out.flatten(1), weights.transpose(1, 2)


@MODELS.register_module()
class AttentionCluster(FeatureHead):
    """Attention-cluster classifier: a :class:`ShiftingAttention` cluster per modality, concatenated, dropout,
    then ``fc1`` (tanh), ``fc2`` (tanh) and the logistic ``fc_logit`` (PaddleCV's layout).

    Real size (YouTube-8M, PaddleCV ``attention_cluster.yaml``): ``feature_dims={rgb: 1024, audio: 128}``,
    ``cluster_nums=32`` (each modality), ``drop_rate=0.5``, ``fc_sizes=[1024, 4096]``, ``num_classes=3862``,
    multi-label: about 57.8 M parameters.

    Args:
        feature_dims: modality -> per-frame width.
        num_classes, multi_label, loss_weight: see :class:`FeatureHead`.
        cluster_nums: attention units per modality (one int, or a mapping modality -> int).
        drop_rate: dropout on the concatenated cluster outputs.
        fc_sizes: widths of ``fc1`` and ``fc2``.
    """

    def __init__(self, feature_dims: Mapping[str, int], num_classes: int, multi_label: bool = True,
                 loss_weight: float = 1.0, cluster_nums: int | Mapping[str, int] = 32, drop_rate: float = 0.5,
                 fc_sizes: tuple[int, int] = (1024, 4096)) -> None:
        super().__init__(feature_dims, num_classes, multi_label, loss_weight)
        if len(fc_sizes) != 2:
            raise ValueError(f"AttentionCluster: fc_sizes={list(fc_sizes)!r} must be two widths [fc1, fc2]")
        nums = per_modality("AttentionCluster", "cluster_nums", cluster_nums, self.modalities)
        self.clusters = nn.ModuleDict({m: ShiftingAttention(d, nums[m]) for m, d in self.feature_dims.items()})
        self.dropout = nn.Dropout(drop_rate)
        width = sum(c.out_channels for c in self.clusters.values())
        self.fc1 = nn.Linear(width, fc_sizes[0])
        self.fc2 = nn.Linear(fc_sizes[0], fc_sizes[1])
        self.fc_logit = nn.Linear(fc_sizes[1], num_classes)

    def attention(self, features: dict[str, Tensor], mask: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        """The concatenated cluster outputs [B, sum N*D] and each modality's weights [B, N, T]."""
        outs, weights = zip(*(self.clusters[m](features[m], mask) for m in self.modalities))
        return torch.cat(outs, dim=1), dict(zip(self.modalities, weights))

    def forward_logits(self, features: dict[str, Tensor], mask: Tensor) -> Tensor:
        x = self.dropout(self.attention(features, mask)[0])
        return self.fc_logit(torch.tanh(self.fc2(torch.tanh(self.fc1(x)))))
