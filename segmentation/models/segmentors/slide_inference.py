"""Sliding-window inference for images larger than the training crops, with tensor gathers/scatters."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch


def window_starts(length: int, crop: int, stride: int) -> torch.Tensor:
    """Start offsets of windows of size ``crop`` every ``stride`` along ``length``; the last window is
    shifted back to end at the border (mmseg's grid), so no window leaves the image."""
    n = max(length - crop + stride - 1, 0) // stride + 1
    return (torch.arange(n) * stride).clamp(max=length - crop)


def slide_inference(
    inputs: torch.Tensor,
    crop_size: Sequence[int],
    stride: Sequence[int],
    encode: Callable[[torch.Tensor], torch.Tensor],
    batch_size: int | None = None,
) -> torch.Tensor:
    """Average the logits of overlapping ``crop_size`` windows (``stride`` apart) over [B, C, H, W] inputs.

    Windows are gathered into one batch with advanced indexing, run through ``encode`` (crops -> logits
    at crop size) in chunks of ``batch_size`` windows (all at once when None), and summed back with
    ``index_add_`` then divided by the per-pixel window count. A crop larger than the image shrinks to it.
    """
    b, c, h, w = inputs.shape
    ch, cw = min(int(crop_size[0]), h), min(int(crop_size[1]), w)
    device = inputs.device
    ys = window_starts(h, ch, int(stride[0])).to(device)
    xs = window_starts(w, cw, int(stride[1])).to(device)
    rows = ys[:, None] + torch.arange(ch, device=device)  # [ny, ch]
    cols = xs[:, None] + torch.arange(cw, device=device)  # [nx, cw]
    ny, nx = rows.shape[0], cols.shape[0]
    r = rows[:, None, :, None]
    k = cols[None, :, None, :]
    crops = inputs[:, :, r, k]  # [B, C, ny, nx, ch, cw]
    crops = crops.permute(0, 2, 3, 1, 4, 5).reshape(b * ny * nx, c, ch, cw)
    step = crops.shape[0] if not batch_size else int(batch_size)
    logits = torch.cat([encode(crops[i : i + step]) for i in range(0, crops.shape[0], step)], dim=0)
    num_classes = logits.shape[1]
    logits = logits.view(b, ny, nx, num_classes, ch, cw).permute(0, 3, 1, 2, 4, 5).reshape(b, num_classes, -1)
    flat_index = (r * w + k).expand(ny, nx, ch, cw).reshape(-1)
    summed = logits.new_zeros(b, num_classes, h * w).index_add_(2, flat_index, logits)
    count = logits.new_zeros(h * w).index_add_(0, flat_index, logits.new_ones(flat_index.shape[0]))
    return (summed / count).view(b, num_classes, h, w)
