"""The boundary-matching layer of BMN: one matrix product samples N points along every candidate proposal of
the [D, T] map at once (Lin et al., ICCV 2019, section 3.3)."""

from __future__ import annotations

import torch
from torch import Tensor


def bm_valid_mask(tscale: int, dscale: int) -> Tensor:
    """Which cells of the [D, T] boundary-matching map are proposals inside the sequence.

    Returns:
        Tensor: float32 [D, T], 1 where ``s + d < T`` (cell ``[d, s]`` starts at ``s`` and spans ``d + 1``
        positions), else 0 (MMAction2's ``bm_mask``).
    """
    d = torch.arange(dscale)[:, None]
    s = torch.arange(tscale)[None, :]
    return (s + d < tscale).float()


def interp1d_sample_mask(tscale: int, dscale: int, prop_boundary_ratio: float, num_sample: int,
                         num_sample_perbin: int) -> Tensor:
    """The sampling matrix of the boundary-matching layer (MMAction2's / PaddleVideo's ``_get_interp1d_mask``).

    Cell ``[d, s]`` (valid when ``s + d < T``) covers positions ``s .. s + d``, extended on both sides by
    ``prop_boundary_ratio * (d + 1)``; ``num_sample * num_sample_perbin`` equally spaced points span that
    region (both ends included), and sample ``n`` averages the linear interpolation weights of its
    ``num_sample_perbin`` consecutive points. A point ``x`` puts weight ``1 - frac`` on ``trunc(x)`` and ``frac``
    on ``ceil(x)`` (``frac = x - trunc(x)``) where those indices are in ``[0, T)``; the truncation toward zero is
    the reference's ``math.modf``, which makes a point in ``(-1, 0)`` weigh 1 on position 0. Invalid cells are 0.

    Args:
        tscale: sequence length T.
        dscale: longest proposal D (in positions; D <= T).
        prop_boundary_ratio: the extension on each side, as a fraction of the proposal's length (BMN: 0.5).
        num_sample: samples N per proposal (BMN: 32).
        num_sample_perbin: points averaged into each sample (BMN: 3).

    Returns:
        Tensor: float32 [T, N * D * T]; features [B, C, T] @ mask -> [B, C, N * D * T], viewed as
        [B, C, N, D, T].
    """
    if not 1 <= dscale <= tscale:
        raise ValueError(f"interp1d_sample_mask: dscale={dscale} must be in [1, tscale={tscale}]")
    n_pts = num_sample * num_sample_perbin
    d = torch.arange(dscale, dtype=torch.float64)[:, None]  # [D, 1]
    s = torch.arange(tscale, dtype=torch.float64)[None, :]  # [1, T]
    length = d + 1
    lo = s - length * prop_boundary_ratio
    hi = s + d + length * prop_boundary_ratio
    step = (hi - lo) / (n_pts - 1.0) if n_pts > 1 else torch.zeros_like(hi)
    k = torch.arange(n_pts, dtype=torch.float64)
    x = lo[..., None] + step[..., None] * k  # [D, T, N*P]
    down, up = torch.trunc(x), torch.ceil(x)
    frac = x - down
    x_shape = (dscale, tscale, num_sample, num_sample_perbin)
    # flat target index of (t, n, d, s) in a [T, N, D, T] tensor
    n_idx = torch.arange(num_sample)[None, None, :, None].expand(x_shape)
    d_idx = torch.arange(dscale)[:, None, None, None].expand(x_shape)
    s_idx = torch.arange(tscale)[None, :, None, None].expand(x_shape)
    cell = (n_idx * dscale + d_idx) * tscale + s_idx
    valid_cell = (s_idx + d_idx) < tscale
    stride = num_sample * dscale * tscale
    out = torch.zeros(tscale * stride, dtype=torch.float64)
    for pos, weight in ((down, 1.0 - frac), (up, frac)):
        pos, weight = pos.reshape(x_shape), weight.reshape(x_shape)
        ok = valid_cell & (pos >= 0) & (pos <= tscale - 1)
        target = pos.long().clamp(0, tscale - 1) * stride + cell
        out.index_add_(0, target[ok], weight[ok] / num_sample_perbin)
    return out.to(torch.float32).view(tscale, stride)


def boundary_matching(x: Tensor, sample_mask: Tensor, num_sample: int, dscale: int) -> Tensor:
    """Sample every proposal of the BM map from a feature sequence.

    Args:
        x: float [B, C, T].
        sample_mask: [T, N * D * T] from :func:`interp1d_sample_mask`.
        num_sample, dscale: N and D of that mask.

    Returns:
        Tensor: [B, C, N, D, T], ``out[b, c, n, d, s]`` = sample ``n`` of proposal ``[d, s]``.
    """
    b, c, t = x.shape
    return torch.matmul(x, sample_mask).view(b, c, num_sample, dscale, t)
