"""NeXtVLAD (Lin, Xiao and Fan, "NeXtVLAD: An Efficient Neural Network to Aggregate Frame-level Features for
Large-scale Video Classification", ECCV 2018 workshops; the best single model of the 2nd YouTube-8M challenge;
PaddleCV's ``NEXTVLAD``)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from video.registry import MODELS

from .base import FeatureHead
from .masking import per_modality


def masked_batch_norm(bn: nn.BatchNorm1d, x: Tensor, mask: Tensor) -> Tensor:
    """Batch-normalise the frames of ``x`` [B, T, C] with ``bn``; while training, the batch statistics come
    from the valid frames (``mask`` bool [B, T]) only, so padding changes neither the output nor the running
    statistics. Padded frames are returned as 0 while training, normalised with the running statistics in eval.
    """
    if bn.training and not bool(mask.all()) and int(mask.sum()) > 1:
        keep = mask.unsqueeze(2).expand_as(x)
        return torch.zeros_like(x).masked_scatter(keep, bn(x[mask]))
    return bn(x.flatten(0, 1)).view_as(x)


class NeXtVLADLayer(nn.Module):
    """Grouped NetVLAD with per-group attention, for one modality.

    Each frame is expanded by a linear map to ``expansion * D`` and split into ``groups`` groups of
    ``expansion * D / groups`` dims; every group of every frame is soft-assigned to ``cluster_size`` clusters
    (softmax of a linear map with batch norm) and weighted by its group's sigmoid attention, which is 0 on
    padded frames; the residuals to the learned cluster centres are summed over frames and groups,
    L2-normalised per cluster (intra-normalisation) and batch-normalised.

    Args:
        in_dim: per-frame width D.
        cluster_size: clusters K (linrongc/PaddleCV 128 for rgb, 64 for audio).
        groups: groups G (8 for rgb, 4 for audio); ``expansion * D`` must divide by it.
        expansion: lambda, the width factor of the expansion layer (2).

    The output has ``K * expansion * D / G`` values (32768 for rgb 1024-d, 4096 for audio 128-d at K 64, G 4).
    """

    def __init__(self, in_dim: int, cluster_size: int = 128, groups: int = 8, expansion: int = 2) -> None:
        super().__init__()
        wide = expansion * in_dim
        if wide % groups:
            raise ValueError(f"NeXtVLADLayer: expansion * in_dim = {expansion} * {in_dim} must divide by "
                             f"groups={groups}")
        self.groups, self.cluster_size, self.group_dim = groups, cluster_size, wide // groups
        self.expansion_fc = nn.Linear(in_dim, wide)
        self.group_attention = nn.Linear(wide, groups)
        self.cluster_fc = nn.Linear(wide, groups * cluster_size, bias=False)
        self.cluster_bn = nn.BatchNorm1d(groups * cluster_size)
        self.centroids = nn.Parameter(torch.randn(self.group_dim, cluster_size) / math.sqrt(cluster_size))
        self.vlad_bn = nn.BatchNorm1d(self.group_dim * cluster_size)
        self.out_channels = self.group_dim * cluster_size
        nn.init.normal_(self.cluster_fc.weight, std=1 / math.sqrt(wide))

    def forward(self, x: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """Aggregate ``x`` [B, T, D] under ``mask`` (bool [B, T]).

        Returns:
            vlad: [B, group_dim * cluster_size];
            attention: [B, T, groups], the sigmoid group attention (0 on padded frames).
        """
        b, t = x.shape[:2]
        g, k, dg = self.groups, self.cluster_size, self.group_dim
        x = self.expansion_fc(x)  # [B, T, lambda*D]
        attention = torch.sigmoid(self.group_attention(x)) * mask.unsqueeze(2).to(x.dtype)  # [B, T, G]
        assign = masked_batch_norm(self.cluster_bn, self.cluster_fc(x), mask)  # [B, T, G*K]
        assign = torch.softmax(assign.reshape(b, t * g, k), dim=2) * attention.reshape(b, t * g, 1)
        residual = torch.einsum("bnk,bnd->bdk", assign, x.reshape(b, t * g, dg))
        residual = residual - assign.sum(1, keepdim=True) * self.centroids  # [B, Dg, K]
        vlad = F.normalize(residual, dim=1).reshape(b, dg * k)
        return self.vlad_bn(vlad), attention


class ContextGating(nn.Module):
    """Squeeze-and-excitation gating of a vector: ``x * sigmoid(W2 relu(bn(W1 x)))`` with a ``reduction``
    bottleneck (NeXtVLAD's SE context gating)."""

    def __init__(self, channels: int, reduction: int = 8) -> None:
        super().__init__()
        if channels % reduction:
            raise ValueError(f"ContextGating: channels={channels} must divide by reduction={reduction}")
        self.fc1 = nn.Linear(channels, channels // reduction, bias=False)
        self.bn = nn.BatchNorm1d(channels // reduction)
        self.fc2 = nn.Linear(channels // reduction, channels, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return x * torch.sigmoid(self.fc2(torch.relu(self.bn(self.fc1(x)))))


@MODELS.register_module()
class NeXtVLAD(FeatureHead):
    """NeXtVLAD classifier: a :class:`NeXtVLADLayer` per modality, concatenated, dropout, a bias-free ``hidden``
    layer with batch norm, :class:`ContextGating`, and the logistic ``fc_logit``.

    Real size (YouTube-8M, the challenge's single model as PaddleCV ``nextvlad.yaml`` / linrongc's code):
    ``feature_dims={rgb: 1024, audio: 128}``, ``cluster_size={rgb: 128, audio: 64}``,
    ``groups={rgb: 8, audio: 4}``, ``expansion=2``, ``hidden_size=2048``, ``gating_reduction=8``,
    ``drop_rate=0.5``, ``num_classes=3862``, multi-label: about 88.9 M parameters (the concatenated VLAD is
    32768 + 4096 wide; 75.5 M of the parameters are the hidden layer).

    Args:
        feature_dims: modality -> per-frame width.
        num_classes, multi_label, loss_weight: see :class:`FeatureHead`.
        cluster_size, groups, expansion: per modality (one int, or a mapping modality -> int).
        hidden_size: width of the hidden layer.
        gating_reduction: bottleneck factor of the context gating.
        drop_rate: dropout on the concatenated VLAD vectors.
    """

    def __init__(self, feature_dims: Mapping[str, int], num_classes: int, multi_label: bool = True,
                 loss_weight: float = 1.0, cluster_size: int | Mapping[str, int] = 128,
                 groups: int | Mapping[str, int] = 8, expansion: int | Mapping[str, int] = 2,
                 hidden_size: int = 2048, gating_reduction: int = 8, drop_rate: float = 0.5) -> None:
        super().__init__(feature_dims, num_classes, multi_label, loss_weight)
        name = type(self).__name__
        ks = per_modality(name, "cluster_size", cluster_size, self.modalities)
        gs = per_modality(name, "groups", groups, self.modalities)
        es = per_modality(name, "expansion", expansion, self.modalities)
        self.vlads = nn.ModuleDict(
            {m: NeXtVLADLayer(d, ks[m], gs[m], es[m]) for m, d in self.feature_dims.items()})
        self.dropout = nn.Dropout(drop_rate)
        self.hidden = nn.Linear(sum(v.out_channels for v in self.vlads.values()), hidden_size, bias=False)
        self.hidden_bn = nn.BatchNorm1d(hidden_size)
        self.gating = ContextGating(hidden_size, gating_reduction)
        self.fc_logit = nn.Linear(hidden_size, num_classes)

    def attention(self, features: dict[str, Tensor], mask: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        """The concatenated VLAD vectors [B, sum K*Dg] and each modality's group attention [B, T, G]."""
        outs, att = zip(*(self.vlads[m](features[m], mask) for m in self.modalities))
        return torch.cat(outs, dim=1), dict(zip(self.modalities, att))

    def forward_logits(self, features: dict[str, Tensor], mask: Tensor) -> Tensor:
        x = self.hidden_bn(self.hidden(self.dropout(self.attention(features, mask)[0])))
        return self.fc_logit(self.gating(x))
