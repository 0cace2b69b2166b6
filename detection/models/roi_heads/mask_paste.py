"""Paste fixed-size RoI masks (28x28) into full images: each mask is stretched over its box by bilinear sampling.

Every mask of a chunk is sampled at once with ``grid_sample`` over the pixels the chunk's boxes cover (the
idea of MMDetection's / Detectron2's ``_do_paste_mask``); chunks bound the float memory to about
``max_chunk_bytes`` whatever the number of masks and the image size.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

# Float bytes per image pixel per mask in a chunk: the sampling grid (2 floats) and the sampled value.
_BYTES_PER_PIXEL = 12


def _paste_chunk(masks: Tensor, boxes: Tensor, x0: int, y0: int, x1: int, y1: int) -> Tensor:
    """``masks [n, h, w]`` sampled at the centres of the pixels ``[y0, y1) x [x0, x1)``: float
    ``[n, y1 - y0, x1 - x0]``."""
    dev = masks.device
    ys = torch.arange(y0, y1, device=dev, dtype=torch.float32) + 0.5
    xs = torch.arange(x0, x1, device=dev, dtype=torch.float32) + 0.5
    bx0, by0, bx1, by1 = boxes.unbind(dim=1)
    # Pixel centre -> [-1, 1] across the box (grid_sample's align_corners=False frame). Centres outside the box
    # (and the +-inf / nan of a box of zero width or height) go to 2, beyond the zero padding: they stay 0, so a
    # mask never bleeds out of its box and the result does not depend on how masks are chunked.
    gy = (ys[None, :] - by0[:, None]) / (by1 - by0)[:, None] * 2 - 1
    gx = (xs[None, :] - bx0[:, None]) / (bx1 - bx0)[:, None] * 2 - 1
    gy = torch.where(gy.abs() <= 1, gy, torch.full_like(gy, 2.0))
    gx = torch.where(gx.abs() <= 1, gx, torch.full_like(gx, 2.0))
    n, h, w = masks.shape[0], ys.numel(), xs.numel()
    grid = torch.stack([gx[:, None, :].expand(n, h, w), gy[:, :, None].expand(n, h, w)], dim=3)
    return F.grid_sample(masks[:, None].float(), grid, mode="bilinear", padding_mode="zeros",
                         align_corners=False)[:, 0]


def paste_masks(
    mask_probs: Tensor,
    boxes: Tensor,
    img_shape: Sequence[int],
    threshold: float | None = 0.5,
    max_chunk_bytes: int = 1 << 28,
) -> Tensor:
    """Paste each RoI mask into an image of ``img_shape`` over its box.

    The mask's pixel grid is laid over the box (mask pixel ``j`` covers ``[x1 + j w/M, x1 + (j+1) w/M)``) and
    every image pixel centre inside takes the bilinear sample there, zero-padded at the mask's border (so
    values fade over the box's outermost half mask-pixel, as in MMDetection and Detectron2). Pixels whose
    centre is outside the box are 0 (MMDetection lets the fade spill up to one pixel out, always below 0.5,
    so binary masks are the same). A box of zero width or height pastes nothing.

    Args:
        mask_probs: float ``[K, M_h, M_w]`` mask probabilities (sigmoid already applied).
        boxes: float ``[K, 4]`` xyxy boxes in the pixels of the target image (original image pixels for a
            detector's predictions).
        img_shape: ``(H, W)`` of the target image.
        threshold: masks are ``prob >= threshold`` (MMDetection's ``mask_thr_binary``); None returns the
            float probabilities instead.
        max_chunk_bytes: memory bound of one chunk's float tensors (masks are pasted ``max_chunk_bytes /
            (12 H W)`` at a time, at least one).

    Returns:
        bool ``[K, H, W]`` (float32 with ``threshold=None``).
    """
    if mask_probs.dim() != 3 or boxes.shape != (mask_probs.shape[0], 4):
        raise ValueError(f"paste_masks: expected mask_probs [K, h, w] and boxes [K, 4], got "
                         f"{tuple(mask_probs.shape)} and {tuple(boxes.shape)}")
    img_h, img_w = int(img_shape[0]), int(img_shape[1])
    num = mask_probs.shape[0]
    dtype = torch.float32 if threshold is None else torch.bool
    out = torch.zeros((num, img_h, img_w), dtype=dtype, device=mask_probs.device)
    if num == 0 or img_h == 0 or img_w == 0:
        return out
    boxes = boxes.float()
    chunk = max(1, int(max_chunk_bytes) // (_BYTES_PER_PIXEL * img_h * img_w))
    for start in range(0, num, chunk):
        b = boxes[start : start + chunk]
        # Only the pixels the chunk's boxes cover (plus one for rounding): the rest stays 0.
        lo = (b[:, :2].min(dim=0).values.floor() - 1).clamp(min=0).tolist()
        hi = (b[:, 2:].max(dim=0).values.ceil() + 1).tolist()
        x0, y0 = int(lo[0]), int(lo[1])
        x1, y1 = min(int(hi[0]), img_w), min(int(hi[1]), img_h)
        if x1 <= x0 or y1 <= y0:
            continue
        pasted = _paste_chunk(mask_probs[start : start + chunk], b, x0, y0, x1, y1)
        out[start : start + chunk, y0:y1, x0:x1] = pasted if threshold is None else pasted >= threshold
    return out

