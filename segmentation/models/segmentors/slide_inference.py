"""Sliding-window inference for images larger than the training crops, with tensor gathers/scatters."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch


def window_starts(length: int, crop: int, stride: int) -> torch.Tensor:
    """Start offsets of windows of size ``crop`` every ``stride`` along ``length``; the last window is
    shifted back to end at the border (mmseg's grid), so no window leaves the image."""
    n = max(length - crop + stride - 1, 0) // stride + 1
    return (torch.arange(n) * stride).clamp(max=length - crop)


def _coverage(length: int, idx: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """How many windows (index rows ``idx`` [n, crop]) cover each position along one axis."""
    flat = idx.reshape(-1)
    return torch.zeros(length, dtype=dtype, device=idx.device).index_add_(
        0, flat, torch.ones(flat.shape[0], dtype=dtype, device=idx.device))


def slide_inference(
    inputs: torch.Tensor,
    crop_size: Sequence[int],
    stride: Sequence[int],
    encode: Callable[[torch.Tensor], torch.Tensor],
    batch_size: int | None = None,
) -> torch.Tensor:
    """Average the logits of overlapping ``crop_size`` windows (``stride`` apart) over [B, C, H, W] inputs.

    Windows (ordered image, row, column) are gathered with advanced indexing ``batch_size`` at a time
    (default 1), run through ``encode`` (crops -> logits at crop size), and each chunk's logits are
    added into the output with ``index_add_`` as soon as it finishes, so peak memory is one chunk
    plus the output (not all window logits, which for a 1024x2048 image are gigabytes). The sum is
    divided by the per-pixel window count. A crop larger than the image shrinks to it.
    """
    if batch_size is not None and (isinstance(batch_size, bool) or int(batch_size) < 1):
        raise ValueError(f"slide_inference: batch_size (test_cfg.batch_size) must be an int >= 1, got {batch_size!r}")
    step = 1 if batch_size is None else int(batch_size)
    b, c, h, w = inputs.shape
    ch, cw = min(int(crop_size[0]), h), min(int(crop_size[1]), w)
    device = inputs.device
    rows = window_starts(h, ch, int(stride[0])).to(device)[:, None] + torch.arange(ch, device=device)  # [ny, ch]
    cols = window_starts(w, cw, int(stride[1])).to(device)[:, None] + torch.arange(cw, device=device)  # [nx, cw]
    ny, nx = rows.shape[0], cols.shape[0]
    per_image = ny * nx
    channel = torch.arange(c, device=device)[None, :, None, None]
    summed: torch.Tensor | None = None
    total = b * per_image
    for start in range(0, total, step):
        end = min(start + step, total)
        win = torch.arange(start, end, device=device)
        img, yi, xi = win // per_image, (win // nx) % ny, win % nx
        r, k = rows[yi][:, None, :, None], cols[xi][:, None, None, :]
        logits = encode(inputs[img[:, None, None, None], channel, r, k])  # [n, K, ch, cw]
        if summed is None:
            summed = logits.new_zeros(b, logits.shape[1], h * w)
        flat = (r * w + k).reshape(end - start, -1)  # [n, ch * cw] pixel indices of each window
        # A chunk spans few images (usually one): add each image's windows along its flattened pixels.
        for i in range(start // per_image, (end - 1) // per_image + 1):
            lo, hi = max(start, i * per_image) - start, min(end, (i + 1) * per_image) - start
            src = logits[lo:hi].permute(1, 0, 2, 3).reshape(logits.shape[1], -1)
            summed[i].index_add_(1, flat[lo:hi].reshape(-1), src)
    assert summed is not None  # at least one window always exists
    count = _coverage(h, rows, summed.dtype)[:, None] * _coverage(w, cols, summed.dtype)[None, :]
    return summed.view(b, -1, h, w).div_(count)
