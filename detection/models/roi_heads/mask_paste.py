"""Paste fixed-size RoI masks (28x28) into full images: each mask is stretched over its box by bilinear sampling.

``F.grid_sample`` samples every mask of a chunk at once over its box's window of image pixels (the idea of
MMDetection's / Detectron2's ``_do_paste_mask``). Masks are sorted by window area and chunked (at most
``masks_per_chunk``, and ``max_chunk_bytes`` of temporaries): a chunk samples all its masks on its largest
window, so similar sizes keep the padding small (about 2x the boxes' area for boxes of mixed shapes, measured),
instead of ``K * H * W`` samples for whole-image grids; one indexed write per chunk puts the windows in place.

``mode='torchvision'`` pastes as torchvision's ``paste_masks_in_image`` (padded masks, widened integer boxes,
``F.interpolate`` sample positions: :mod:`.mask_paste_torchvision`), with the same chunking.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from . import mask_paste_torchvision as _tv

PASTE_MODES = ("mmdet", "torchvision")
# Bytes of temporaries per sampled pixel of a chunk: the grid (2 floats), the sample, the thresholded value.
_BYTES_PER_PIXEL = 16


def _sample(masks: Tensor, boxes: Tensor, xs: Tensor, ys: Tensor) -> Tensor:
    """``masks [n, h, w]`` sampled at the centres of the pixels ``ys [n, H'] x xs [n, W']`` (int64 image pixel
    indices, a row per mask): float ``[n, H', W']``, 0 at pixel centres outside the mask's box."""
    bx0, by0, bx1, by1 = boxes.unbind(dim=1)
    # Pixel centre -> [-1, 1] across the box (grid_sample's align_corners=False frame). Centres outside the box
    # (and the +-inf / nan of a box of zero width or height) go to 2, beyond the zero padding, so they are 0: a
    # mask never bleeds out of its box, and the result does not depend on the window it was sampled in.
    gy = (ys.float() + 0.5 - by0[:, None]) / (by1 - by0)[:, None] * 2 - 1
    gx = (xs.float() + 0.5 - bx0[:, None]) / (bx1 - bx0)[:, None] * 2 - 1
    gy = torch.where(gy.abs() <= 1, gy, torch.full_like(gy, 2.0))
    gx = torch.where(gx.abs() <= 1, gx, torch.full_like(gx, 2.0))
    n, h, w = masks.shape[0], ys.shape[1], xs.shape[1]
    grid = torch.stack([gx[:, None, :].expand(n, h, w), gy[:, :, None].expand(n, h, w)], dim=3)
    return F.grid_sample(masks[:, None].float(), grid, mode="bilinear", padding_mode="zeros",
                         align_corners=False)[:, 0]


def paste_masks(
    mask_probs: Tensor,
    boxes: Tensor,
    img_shape: Sequence[int],
    threshold: float | None = 0.5,
    masks_per_chunk: int = 8,
    max_chunk_bytes: int = 1 << 28,
    mode: str = "mmdet",
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
        masks_per_chunk: the most masks sampled together (8: the least total time measured on CPU).
        max_chunk_bytes: memory bound of a chunk's temporaries (16 bytes per sampled pixel, 20 in torchvision
            mode; at least one mask per chunk). The output itself is ``K * H * W`` bools (or floats).
        mode: ``'mmdet'`` (the above) or ``'torchvision'``: torchvision's ``paste_masks_in_image`` (each mask
            padded by one zero pixel, its box widened by ``(M + 2) / M`` and truncated to int64, the padded mask
            resized bilinearly onto the box's pixels, last row and column included), what a converted torchvision
            Mask R-CNN needs to give torchvision's masks.

    Returns:
        bool ``[K, H, W]`` (float32 with ``threshold=None``).
    """
    if mask_probs.dim() != 3 or boxes.shape != (mask_probs.shape[0], 4):
        raise ValueError(f"paste_masks: expected mask_probs [K, h, w] and boxes [K, 4], got "
                         f"{tuple(mask_probs.shape)} and {tuple(boxes.shape)}")
    if mode not in PASTE_MODES:
        raise ValueError(f"paste_masks: mode={mode!r} is invalid; accepted: {list(PASTE_MODES)}")
    img_h, img_w = int(img_shape[0]), int(img_shape[1])
    num = mask_probs.shape[0]
    device = mask_probs.device
    out = torch.zeros((num, img_h, img_w), dtype=torch.float32 if threshold is None else torch.bool, device=device)
    if num == 0 or img_h == 0 or img_w == 0:
        return out
    boxes = boxes.float()
    window, sample, bytes_per_pixel = boxes, _sample, _BYTES_PER_PIXEL
    if mode == "torchvision":
        mask_probs, boxes = _tv.expand_masks_and_boxes(mask_probs, boxes)
        window = torch.cat([boxes[:, :2], boxes[:, 2:] + 1], dim=1).float()  # integer boxes: last pixel inside
        sample, bytes_per_pixel = _tv.sample_like_interpolate, _tv.BYTES_PER_PIXEL
    # Each mask's window: the pixels its box touches, inside the image.
    lo = window[:, :2].floor().clamp(min=0)
    hi = torch.minimum(window[:, 2:].ceil(), window.new_tensor([img_w, img_h]))
    origin = lo.long()
    size = (hi - lo).clamp(min=0).long()  # (w, h)
    order = size.prod(dim=1).argsort()
    largest = int(size[order[-1]].prod())
    chunk = max(1, min(int(masks_per_chunk), int(max_chunk_bytes) // (bytes_per_pixel * max(largest, 1))))
    # The window every chunk samples on: its masks' widest and highest (one host sync for all chunks).
    starts = list(range(0, num, chunk))
    padded = torch.cat([size[order], size[order[-1:]].expand((-num) % chunk, 2)])
    chunk_sizes = padded.view(-1, chunk, 2).max(dim=1).values.tolist()
    limit = torch.tensor([img_w, img_h], device=device)
    for start, (w, h) in zip(starts, chunk_sizes):
        if w == 0 or h == 0:
            continue
        idx = order[start : start + chunk]
        # A window smaller than the chunk's is widened; moved back where it would leave the image. It still
        # holds the whole box's pixels, and its other pixels sample to 0 (outside the box).
        corner = torch.minimum(origin[idx], limit - torch.tensor([w, h], device=device))
        xs = corner[:, 0:1] + torch.arange(w, device=device)
        ys = corner[:, 1:2] + torch.arange(h, device=device)
        vals = sample(mask_probs[idx], boxes[idx], xs, ys)
        out[idx[:, None, None], ys[:, :, None], xs[:, None, :]] = vals if threshold is None else vals >= threshold
    return out
