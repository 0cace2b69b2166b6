"""BMN's candidate proposals on tensors: thin adapters over the runtime's NumPy implementation
(:mod:`oars_deploy.segments.proposals`), so that training-side evaluation and the deployed ``video_segments``
predictor cannot disagree. The tensors go to the CPU and back (one video's [2, D, T] map: small)."""

from __future__ import annotations

import torch
from torch import Tensor

from oars_deploy.predictors.video_segments.segments import proposals as _np


def _numpy(x: Tensor):
    return x.detach().cpu().numpy()


def boundary_candidates(prob: Tensor, first: bool) -> Tensor:
    """:func:`oars_deploy.segments.proposals.boundary_candidates` on a tensor.

    Args:
        prob: float [..., T] start (or end) probabilities.
        first: True for starts (position 0 always, T-1 never), False for ends.

    Returns:
        Tensor: bool [..., T] on ``prob``'s device.
    """
    return torch.from_numpy(_np.boundary_candidates(_numpy(prob), first)).to(prob.device)


def bmn_proposals(start: Tensor, end: Tensor, confidence: Tensor) -> Tensor:
    """:func:`oars_deploy.segments.proposals.bmn_proposals` on tensors.

    Args:
        start, end: float [T] boundary probabilities.
        confidence: float [2, D, T] (regressed IoU, classified IoU).

    Returns:
        Tensor: [K, 3] (start, end in normalised time, score) of ``start``'s dtype, on its device.
    """
    out = _np.bmn_proposals(_numpy(start), _numpy(end), _numpy(confidence))
    return torch.from_numpy(out).to(device=start.device, dtype=start.dtype)
