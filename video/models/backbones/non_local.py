"""Non-local block, embedded-Gaussian version (Wang et al., "Non-local Neural Networks", CVPR 2018, eq. 1-3, 6),
for 2D backbones that carry clips as [N*T, C, H, W] (C2D): attention over all T x H x W positions of a clip."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from oars.models.layers import build_norm_layer
from oars.models.layers.norm import NormSpec


class NonLocalBlock(nn.Module):
    """``z = x + W(y)``, ``y_i = sum_j softmax_j(theta(x_i) . phi(x_j)) g(x_j)`` over every position j of the clip.

    Args:
        in_channels: C.
        num_segments: frames per clip T (the batch holds N*T frames, clip-major).
        reduction: theta/phi/g have ``C // reduction`` channels (the paper's bottleneck, 2).
        sub_sample: max-pool phi and g 2x2 in space (the paper's subsampling, 1/4 of the pairwise cost).
        use_scale: divide the dot products by sqrt(C // reduction) (as attention; the paper does not).
        norm: norm after the output 1x1 conv W. Its weight starts at 0, so the block starts as the identity and a
            pretrained backbone's behaviour is kept (the paper's initialisation).

    ``forward(x)``: float [N*T, C, H, W] -> float [N*T, C, H, W].

    The 1x1x1 convolutions of the paper are 1x1 ``Conv2d`` per frame (the same map), and a BN over [N*T, C, H, W]
    has the statistics of a BN3d over [N, C, T, H, W]; only the attention needs the clip view. It runs through
    ``F.scaled_dot_product_attention`` (fused kernels; exported as ONNX Attention / MatMul-Softmax).
    """

    def __init__(self, in_channels: int, num_segments: int, reduction: int = 2, sub_sample: bool = True,
                 use_scale: bool = False, norm: NormSpec = "BN") -> None:
        super().__init__()
        if isinstance(reduction, bool) or not isinstance(reduction, int) or not 1 <= reduction <= in_channels:
            raise ValueError(f"NonLocalBlock: reduction must be an int in [1, {in_channels}], got {reduction!r}")
        inter = in_channels // reduction
        self.num_segments = num_segments
        self.inter_channels = inter
        self.scale = 1.0 / math.sqrt(inter) if use_scale else 1.0
        self.theta = nn.Conv2d(in_channels, inter, 1)
        self.phi = nn.Conv2d(in_channels, inter, 1)
        self.g = nn.Conv2d(in_channels, inter, 1)
        self.pool = nn.MaxPool2d(2) if sub_sample else nn.Identity()
        self.out_conv = nn.Conv2d(inter, in_channels, 1)
        self.out_norm = build_norm_layer(norm, in_channels)
        for conv in (self.theta, self.phi, self.g, self.out_conv):
            nn.init.normal_(conv.weight, 0.0, 0.01)
            nn.init.zeros_(conv.bias)
        if getattr(self.out_norm, "weight", None) is None:
            raise ValueError(f"NonLocalBlock: norm={norm!r} has no weight to start the block as the identity; use BN, "
                             "SyncBN or GN")
        with torch.no_grad():  # FrozenBN keeps weight/bias as buffers; zero them in place either way
            self.out_norm.weight.zero_()
            self.out_norm.bias.zero_()

    def _clip_tokens(self, x: torch.Tensor, n: int) -> torch.Tensor:
        """[N*T, C', h, w] -> [N, T*h*w, C'] (positions of one clip as a sequence)."""
        _, c, h, w = x.shape
        return x.reshape(n, self.num_segments, c, h * w).permute(0, 1, 3, 2).reshape(n, -1, c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        nt, _, h, w = x.shape
        if nt % self.num_segments:
            raise ValueError(f"NonLocalBlock: {nt} frames is not a multiple of num_segments={self.num_segments}")
        n = nt // self.num_segments
        query = self._clip_tokens(self.theta(x), n)
        key = self._clip_tokens(self.pool(self.phi(x)), n)
        value = self._clip_tokens(self.pool(self.g(x)), n)
        # one attention head as a 4-d [N, 1, L, C'] call: the ONNX exporter translates only 4-d attention
        y = F.scaled_dot_product_attention(query[:, None], key[:, None], value[:, None], scale=self.scale)
        y = y.reshape(n, self.num_segments, h, w, self.inter_channels).permute(0, 1, 4, 2, 3)
        y = y.reshape(nt, self.inter_channels, h, w)
        return x + self.out_norm(self.out_conv(y))

    def extra_repr(self) -> str:
        return f"num_segments={self.num_segments}, inter_channels={self.inter_channels}, scale={self.scale:.4g}"
