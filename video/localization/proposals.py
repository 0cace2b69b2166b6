"""BMN's candidate proposals: boundary peaks from the start/end probabilities, paired through the BM confidence
map (MMAction2's ``BMN.predict``, vectorised over the [D, T] map instead of two Python loops)."""

from __future__ import annotations

import torch
from torch import Tensor


def boundary_candidates(prob: Tensor, first: bool) -> Tensor:
    """Which positions may be a boundary: a strict local maximum, or a probability above half the sequence's
    maximum (BSN/BMN's rule, so that both sharp peaks and long plateaus of high probability are tried).

    Args:
        prob: float [..., T] start (or end) probabilities.
        first: True for starts: position 0 is always a candidate and position T-1 never (a start there has no
            room for an end); False for ends: position T-1 always, position 0 never. As MMAction2's loops, which
            only test the interior positions 1..T-2.

    Returns:
        Tensor: bool [..., T].
    """
    t = prob.shape[-1]
    out = torch.zeros_like(prob, dtype=torch.bool)
    if t >= 3:
        mid = prob[..., 1:-1]
        peak = (mid > prob[..., 2:]) & (mid > prob[..., :-2])
        out[..., 1:-1] = peak | (mid > 0.5 * prob.amax(dim=-1, keepdim=True))
    out[..., 0 if first else t - 1] = True
    return out


def bmn_proposals(start: Tensor, end: Tensor, confidence: Tensor) -> Tensor:
    """Every (start, end) pair of boundary candidates that the BM map scores, for one video.

    Map cell ``[d, s]`` is the proposal from position ``s`` to position ``e = s + d + 1`` (normalised time
    ``s / T`` to ``e / T``); a pair is kept when ``s`` is a start candidate, ``e`` an end candidate and
    ``e < T`` (as MMAction2: the last index is the latest end). Its score is
    ``start[s] * end[e] * cls[d, s] * reg[d, s]``.

    Args:
        start, end: float [T] boundary probabilities.
        confidence: float [2, D, T], channel 0 the regressed IoU, channel 1 the classified IoU (BMN's order).

    Returns:
        Tensor: float [K, 3] (start, end in normalised time, score), in [d, s] order.
    """
    t = start.shape[-1]
    d = confidence.shape[-2]
    starts = boundary_candidates(start, first=True)
    ends = boundary_candidates(end, first=False)
    s_idx = torch.arange(t, device=start.device).expand(d, t)
    e_idx = s_idx + torch.arange(1, d + 1, device=start.device)[:, None]
    inside = e_idx < t
    e_safe = e_idx.clamp(max=t - 1)
    keep = inside & starts[s_idx] & ends[e_safe]
    score = start[s_idx] * end[e_safe] * confidence[1] * confidence[0]
    s_k, e_k = s_idx[keep], e_idx[keep]
    return torch.stack([s_k.to(start.dtype) / t, e_k.to(start.dtype) / t, score[keep]], dim=1)
