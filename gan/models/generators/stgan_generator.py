"""STGAN's generator (Liu et al. 2019, "STGAN: A Unified Selective Transfer Network for Arbitrary Image Attribute
Editing"): AttGAN's encoder-decoder whose skip connections pass through selective transfer units (STUs) driven by
the attribute difference vector."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from gan.registry import MODELS

from .attgan_generator import AttGANGenerator, concat_attrs


class SelectiveTransferUnit(nn.Module):
    """One STU: a convolutional GRU cell whose hidden state comes from the coarser level.

    ``state`` [B, C_s, h, w] (the coarser level's state, with the difference vector tiled on it) is upsampled by a
    4x4 stride-2 transposed conv to ``channels`` (``s``); with the skip feature ``f`` [B, channels, 2h, 2w]:
    ``r = sigmoid(conv([f, s]))`` (reset), ``u = sigmoid(conv([f, s]))`` (update), ``n = tanh(conv([f, r * s]))``,
    output ``t = (1 - u) * s + u * n`` (the transferred feature the decoder gets) and the next level's state
    ``r * s`` (STGAN's ``stu_state``). The gates decide per position how much of the encoder feature and how
    much of the attribute-aware state pass: the edit touches only what it needs.

    Returns (output [B, channels, 2h, 2w], state [B, channels, 2h, 2w]).
    """

    def __init__(self, state_channels: int, channels: int, kernel_size: int = 3) -> None:
        super().__init__()
        pad = kernel_size // 2
        self.upsample = nn.ConvTranspose2d(state_channels, channels, 4, 2, 1)
        self.reset_gate = nn.Conv2d(2 * channels, channels, kernel_size, 1, pad)
        self.update_gate = nn.Conv2d(2 * channels, channels, kernel_size, 1, pad)
        self.hidden = nn.Conv2d(2 * channels, channels, kernel_size, 1, pad)

    def forward(self, feat: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        s = self.upsample(state)
        if s.shape != feat.shape:
            raise ValueError(f"SelectiveTransferUnit: the upsampled state {tuple(s.shape)} does not match the skip "
                             f"feature {tuple(feat.shape)}")
        fs = torch.cat([feat, s], dim=1)
        reset = torch.sigmoid(self.reset_gate(fs))
        update = torch.sigmoid(self.update_gate(fs))
        left = reset * s
        new = torch.tanh(self.hidden(torch.cat([feat, left], dim=1)))
        return (1.0 - update) * s + update * new, left


@MODELS.register_module()
class STGANGenerator(AttGANGenerator):
    """Image [B, 3, H, W] in [-1, 1] + attribute DIFFERENCE [B, K] (scaled target - scaled source) -> edited image.

    :class:`AttGANGenerator` (shortcut 4, inject 4 by default, as STGAN) with ``stu_layers`` STUs between the
    encoder and the decoder: starting from the deepest feature with the difference tiled on it, each STU (coarse to
    fine) turns the skip feature of its level into a transferred one; the decoder concatenates the transferred
    features instead of the raw encoder ones (the deepest feature goes to the decoder unchanged). The state passed
    to the next finer STU gets the difference tiled on it again for the first ``stu_inject_layers`` levels.
    At 13 attributes: 75.0 M parameters (encoder 11.15 M, STUs 30.15 M, decoder 33.71 M).

    Args:
        stu_layers: how many skip levels get an STU (4: every skip).
        stu_kernel_size: the gates' kernel (3).
    """

    def __init__(self, num_attrs: int = 13, in_channels: int = 3, out_channels: int = 3, conv_dim: int = 64,
                 num_layers: int = 5, max_dim: int = 1024, shortcut_layers: int = 4, inject_layers: int = 4,
                 stu_layers: int = 4, stu_inject_layers: int = 4, stu_kernel_size: int = 3,
                 norm: str | dict = "BN", negative_slope: float = 0.2, init: dict[str, Any] | None = None) -> None:
        super().__init__(num_attrs, in_channels, out_channels, conv_dim, num_layers, max_dim, shortcut_layers,
                         inject_layers, norm, negative_slope, init)
        self.stu_layers = min(int(stu_layers), num_layers - 1)
        self.stu_inject_layers = int(stu_inject_layers)
        self.stus = nn.ModuleList()
        state = self.enc_dims[-1] + self.num_attrs
        for i in range(self.stu_layers):
            d = self.enc_dims[num_layers - 2 - i]
            self.stus.append(SelectiveTransferUnit(state, d, stu_kernel_size))
            state = d + (self.num_attrs if i < self.stu_inject_layers else 0)

    def transfer(self, feats: list[torch.Tensor], diff: torch.Tensor) -> list[torch.Tensor]:
        """Encoder features (finest first) -> the same list with the ``stu_layers`` coarsest skips replaced by
        their STU outputs (shapes unchanged)."""
        out = list(feats)
        state = concat_attrs(feats[-1], diff)
        for i, stu in enumerate(self.stus):
            level = self.num_layers - 2 - i
            out[level], state = stu(feats[level], state)
            if i < self.stu_inject_layers:
                state = concat_attrs(state, diff)
        return out

    def decode(self, feats: list[torch.Tensor], attrs: torch.Tensor) -> torch.Tensor:
        """Encoder features + difference [B, K] -> image: STUs, then AttGAN's decoder on the transferred skips."""
        return super().decode(self.transfer(feats, attrs), attrs)
