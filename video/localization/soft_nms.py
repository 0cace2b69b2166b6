"""Gaussian Soft-NMS of temporal proposals on tensors: a thin adapter over the runtime's NumPy implementation
(:func:`oars_deploy.segments.soft_nms.soft_nms`, where the rule is documented), so that training-side evaluation
and the deployed ``video_segments`` predictor cannot disagree."""

from __future__ import annotations

import torch
from torch import Tensor

from oars_deploy.predictors.video_segments.segments.soft_nms import soft_nms as _soft_nms


def soft_nms(proposals: Tensor, alpha: float = 0.4, low_threshold: float = 0.5, high_threshold: float = 0.9,
             top_k: int = 100) -> Tensor:
    """:func:`oars_deploy.segments.soft_nms.soft_nms` on a tensor.

    Args:
        proposals: float [K, >= 3] (start, end in normalised time, ..., score).
        alpha, low_threshold, high_threshold, top_k: as the NumPy function (BMN: 0.4, 0.5, 0.9, 100).

    Returns:
        Tensor: [min(K, top_k + 1), 3] (start, end, decayed score) in pick order, ``proposals``' dtype and device.

    Raises:
        ValueError: ``proposals`` is not [K, >= 3].
    """
    out = _soft_nms(proposals.detach().cpu().numpy(), alpha, low_threshold, high_threshold, top_k)
    return torch.from_numpy(out).to(device=proposals.device, dtype=proposals.dtype)
