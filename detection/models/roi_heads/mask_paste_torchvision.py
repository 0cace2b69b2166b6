"""torchvision's mask pasting (``paste_masks_in_image``), vectorised: the ``paste_mode: torchvision`` of
:func:`detection.models.roi_heads.mask_paste.paste_masks`.

torchvision pads each ``M x M`` mask with one zero pixel per side, widens its box by ``(M + 2) / M`` about the
centre, truncates the box to int64 pixels, resizes the padded mask with ``F.interpolate`` (bilinear,
``align_corners=False``) to the box's ``(y2 - y1 + 1) x (x2 - x1 + 1)`` pixels (the integer box's last row and
column are inside) and writes it into the image. Done mask by mask in Python there; here the resize is evaluated
directly at the image pixels of each mask's window with the same sample positions and weights as
``F.interpolate``'s CPU kernel, for a chunk of masks at once (the chunking lives in ``paste_masks``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

# Temporaries per sampled pixel of a chunk: 2 gathered rows, the blend, its threshold, the mask (float32/bool).
BYTES_PER_PIXEL = 20


def expand_masks_and_boxes(mask_probs: Tensor, boxes: Tensor, padding: int = 1) -> tuple[Tensor, Tensor]:
    """torchvision's ``expand_masks`` + ``expand_boxes`` + int64 truncation.

    Args:
        mask_probs: float ``[K, M, M]`` mask probabilities.
        boxes: float ``[K, 4]`` xyxy boxes in the target image's pixels.
        padding: zero pixels added on each side of a mask (torchvision's 1).

    Returns:
        the padded masks float ``[K, M + 2p, M + 2p]`` and int64 ``[K, 4]`` boxes widened by ``(M + 2p) / M``
        about their centres, truncated toward zero (``Tensor.to(torch.int64)``, as torchvision).
    """
    m = mask_probs.shape[-1]
    scale = float(m + 2 * padding) / m
    padded = F.pad(mask_probs, (padding,) * 4)
    boxes = boxes.float()
    half_w = (boxes[:, 2] - boxes[:, 0]) * 0.5
    half_h = (boxes[:, 3] - boxes[:, 1]) * 0.5
    cx = (boxes[:, 2] + boxes[:, 0]) * 0.5
    cy = (boxes[:, 3] + boxes[:, 1]) * 0.5
    half_w = half_w * scale
    half_h = half_h * scale
    expanded = torch.stack([cx - half_w, cy - half_h, cx + half_w, cy + half_h], dim=1)
    return padded, expanded.to(torch.int64)


def _axis_weights(pos: Tensor, start: Tensor, end: Tensor, size_in: int
                  ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Bilinear taps along one axis, as ``F.interpolate(mode='bilinear', align_corners=False)`` computes them.

    Args:
        pos: int64 ``[n, L]`` image pixel indices (a row per mask).
        start, end: int64 ``[n]`` the integer box's first and last pixel (inclusive) on this axis.
        size_in: the padded mask's length on this axis.

    Returns:
        ``(i0, i1, w0, w1, inside)``: int64 ``[n, L]`` source indices, float32 ``[n, L]`` weights, bool ``[n, L]``
        whether the pixel lies on the mask's resized extent (``start <= pos <= end``).
    """
    length = (end - start + 1).clamp(min=1)  # torchvision: max(int(x2 - x1 + 1), 1)
    dst = pos - start[:, None]
    inside = (dst >= 0) & (dst < length[:, None])
    scale = torch.tensor(float(size_in), dtype=torch.float32, device=pos.device) / length.float()
    src = (scale[:, None] * (dst.float() + 0.5) - 0.5).clamp(min=0)
    i0 = src.floor().long().clamp(max=size_in - 1)
    w1 = (src - i0.float()).clamp(0, 1)
    i1 = torch.where(i0 < size_in - 1, i0 + 1, i0)
    return i0.clamp(min=0), i1.clamp(min=0), 1 - w1, w1, inside


def sample_like_interpolate(masks: Tensor, boxes: Tensor, xs: Tensor, ys: Tensor) -> Tensor:
    """Values at image pixels ``ys [n, H'] x xs [n, W']`` of each padded mask resized over its integer box.

    Args:
        masks: float ``[n, Mh, Mw]`` padded masks (:func:`expand_masks_and_boxes`).
        boxes: int64 ``[n, 4]`` their expanded integer boxes.
        xs, ys: int64 ``[n, W']`` / ``[n, H']`` the window's image pixel indices, one row per mask.

    Returns:
        float32 ``[n, H', W']``, 0 at pixels outside the box's ``[x1, x2] x [y1, y2]``.
    """
    n, mh, mw = masks.shape
    y0, y1, hy0, hy1, in_y = _axis_weights(ys, boxes[:, 1], boxes[:, 3], mh)
    x0, x1, wx0, wx1, in_x = _axis_weights(xs, boxes[:, 0], boxes[:, 2], mw)
    # Separable, as the bilinear kernel: along x on the mask's rows first, then along y on the window's rows.
    m = masks.float()
    cols = (x0.shape[1],)
    rows = wx0[:, None, :] * m.gather(2, x0[:, None, :].expand(n, mh, *cols)) \
        + wx1[:, None, :] * m.gather(2, x1[:, None, :].expand(n, mh, *cols))  # [n, Mh, W']
    k = torch.arange(n, device=masks.device)[:, None]
    vals = hy0[:, :, None] * rows[k, y0] + hy1[:, :, None] * rows[k, y1]  # [n, H', W']
    return torch.where(in_y[:, :, None] & in_x[:, None, :], vals, torch.zeros_like(vals))
