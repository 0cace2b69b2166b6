"""Paste fixed-size RoI masks (28x28) into full images: the runtime's paste (``oars_deploy.mask_paste``) on tensors.

Why one implementation: the eager Mask R-CNN, its exported graph's predictors (Python and, through the same
formulas, C++) and the evaluation must paste alike, or the deployed masks drift from the evaluated ones. The
runtime's NumPy paste (separable bilinear sampling over each box's window; ``'mmdet'`` and ``'torchvision'``
modes) is that one implementation; this adapter moves the [K, 28, 28] probabilities and [K, 4] boxes to the CPU
and the pasted [K, H, W] masks back to the input's device.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from oars_deploy.mask_paste import PASTE_MODES
from oars_deploy.mask_paste import paste_masks as paste_masks_numpy

__all__ = ["PASTE_MODES", "paste_masks"]


def paste_masks(mask_probs: Tensor, boxes: Tensor, img_shape: Sequence[int], threshold: float | None = 0.5,
                mode: str = "mmdet") -> Tensor:
    """Paste each RoI mask into an image of ``img_shape`` over its box (:func:`oars_deploy.mask_paste.paste_masks`).

    Args:
        mask_probs: float ``[K, M_h, M_w]`` mask probabilities (sigmoid already applied).
        boxes: float ``[K, 4]`` xyxy boxes in the pixels of the target image.
        img_shape: ``(H, W)`` of the target image.
        threshold: masks are ``prob >= threshold`` (MMDetection's ``mask_thr_binary``); None returns the float
            probabilities.
        mode: ``'mmdet'`` or ``'torchvision'`` (torchvision's ``paste_masks_in_image``, for converted weights).

    Returns:
        bool ``[K, H, W]`` (float32 with ``threshold=None``) on ``mask_probs``' device.

    Raises:
        ValueError: shapes that do not match, or an unknown ``mode``.
    """
    if mask_probs.dim() != 3 or tuple(boxes.shape) != (mask_probs.shape[0], 4):
        raise ValueError(f"paste_masks: expected mask_probs [K, h, w] and boxes [K, 4], got "
                         f"{tuple(mask_probs.shape)} and {tuple(boxes.shape)}")
    pasted = paste_masks_numpy(mask_probs.detach().float().cpu().numpy(), boxes.detach().float().cpu().numpy(),
                               img_shape, threshold, mode)
    return torch.from_numpy(pasted).to(mask_probs.device)
