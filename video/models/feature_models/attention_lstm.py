"""Attention LSTM over frame features (PaddleVideo's ``AttentionLstmHead``; Long et al.'s attention pooling on a
bidirectional LSTM, as in the YouTube-8M challenge baselines)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor, nn

from video.registry import MODELS

from .base import FeatureHead
from .masking import masked_softmax, per_modality, reverse_valid, valid_lengths

_ACTS = {"relu": nn.ReLU, "tanh": nn.Tanh}


class LSTMAttentionPool(nn.Module):
    """One modality: ``tanh(fc)`` embedding, bidirectional LSTM, attention pooling over the valid frames.

    The two directions are separate one-way LSTMs (``lstm_fw``, ``lstm_bw``, as PaddleCV's two dynamic LSTMs);
    the backward one reads each sample's valid frames last-to-first (:func:`reverse_valid`), so padding never
    enters a valid frame's state and no ``pack_padded_sequence`` is needed (the graph exports to ONNX).

    Args:
        in_dim: per-frame feature width D.
        embedding_size: width of the ``fc`` embedding (PaddleVideo 512).
        lstm_size: hidden size of each direction (PaddleVideo 1024); the pooled output is ``2 * lstm_size``.
        drop_rate: dropout on the LSTM outputs before the attention score and the pooling (PaddleVideo 0.5).
    """

    def __init__(self, in_dim: int, embedding_size: int, lstm_size: int, drop_rate: float) -> None:
        super().__init__()
        self.fc = nn.Linear(in_dim, embedding_size)
        self.lstm_fw = nn.LSTM(embedding_size, lstm_size, batch_first=True)
        self.lstm_bw = nn.LSTM(embedding_size, lstm_size, batch_first=True)
        self.dropout = nn.Dropout(drop_rate)
        self.att_fc = nn.Linear(2 * lstm_size, 1)
        self.out_channels = 2 * lstm_size

    def forward(self, x: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """Pool ``x`` [B, T, D] (padded frames zeroed) under ``mask`` (bool [B, T]).

        Returns:
            pooled: [B, 2 * lstm_size], the attention-weighted sum of the LSTM outputs;
            weights: [B, T], softmax of the attention scores over each sample's valid frames (0 on padding).
        """
        emb = torch.tanh(self.fc(x))
        lengths = valid_lengths(mask)
        fw, _ = self.lstm_fw(emb)
        bw, _ = self.lstm_bw(reverse_valid(emb, lengths))
        h = self.dropout(torch.cat([fw, reverse_valid(bw, lengths)], dim=2))
        weights = masked_softmax(self.att_fc(h).squeeze(2), mask, dim=1)
        return torch.einsum("bt,btc->bc", weights, h), weights


@MODELS.register_module()
class AttentionLSTM(FeatureHead):
    """Attention LSTM classifier of frame features.

    Per modality an :class:`LSTMAttentionPool`; the pooled vectors are concatenated and go through
    ``fc_sizes`` fully connected layers (``fc_acts`` after each) and ``fc_logit``.

    Real size (YouTube-8M, PaddleVideo ``attention_lstm.yaml``): ``feature_dims={rgb: 1024, audio: 128}``,
    ``embedding_size=512``, ``lstm_size=1024``, ``drop_rate=0.5``, ``fc_sizes=[8192, 4096]``,
    ``fc_acts=[relu, tanh]``, ``num_classes=3862``, multi-label: about 108.7 M parameters.

    Args:
        feature_dims: modality -> per-frame width.
        num_classes, multi_label, loss_weight: see :class:`FeatureHead`.
        embedding_size, lstm_size: one int for every modality or a mapping modality -> int.
        drop_rate: dropout on the LSTM outputs.
        fc_sizes: widths of the fully connected layers after the concatenation.
        fc_acts: activation after each of them (``relu`` or ``tanh``), same length as ``fc_sizes``.
    """

    def __init__(self, feature_dims: Mapping[str, int], num_classes: int, multi_label: bool = True,
                 loss_weight: float = 1.0, embedding_size: int | Mapping[str, int] = 512,
                 lstm_size: int | Mapping[str, int] = 1024, drop_rate: float = 0.5,
                 fc_sizes: Sequence[int] = (8192, 4096), fc_acts: Sequence[str] = ("relu", "tanh")) -> None:
        super().__init__(feature_dims, num_classes, multi_label, loss_weight)
        name = type(self).__name__
        if len(fc_sizes) != len(fc_acts) or any(a not in _ACTS for a in fc_acts):
            raise ValueError(f"{name}: fc_acts={list(fc_acts)!r} must name one activation from {sorted(_ACTS)} "
                             f"per entry of fc_sizes={list(fc_sizes)!r}")
        emb = per_modality(name, "embedding_size", embedding_size, self.modalities)
        hid = per_modality(name, "lstm_size", lstm_size, self.modalities)
        self.pools = nn.ModuleDict(
            {m: LSTMAttentionPool(d, emb[m], hid[m], drop_rate) for m, d in self.feature_dims.items()})
        layers: list[nn.Module] = []
        width = sum(p.out_channels for p in self.pools.values())
        for size, act in zip(fc_sizes, fc_acts):
            layers += [nn.Linear(width, size), _ACTS[act]()]
            width = size
        self.fc = nn.Sequential(*layers)
        self.fc_logit = nn.Linear(width, num_classes)

    def attention(self, features: dict[str, Tensor], mask: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        """The concatenated pooled vectors [B, sum 2*lstm_size] and each modality's weights [B, T]."""
        pooled, weights = zip(*(self.pools[m](features[m], mask) for m in self.modalities))
        return torch.cat(pooled, dim=1), dict(zip(self.modalities, weights))

    def forward_logits(self, features: dict[str, Tensor], mask: Tensor) -> Tensor:
        return self.fc_logit(self.fc(self.attention(features, mask)[0]))
