"""BMN's training targets from ground-truth segments, for a whole batch at once (torch, no per-proposal loops):
the start / end probability sequences and the [D, T] map of each candidate proposal's best IoU."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from video.localization import segment_ioa, segment_iou


def pad_segments(segments: Sequence[Tensor], device: torch.device) -> tuple[Tensor, Tensor]:
    """B tensors [N_i, 2] -> (float32 [B, N_max, 2] zero-padded, bool [B, N_max] True on real segments).
    ``N_max`` is at least 1 so that a batch with no segment still gives well-formed (all-zero) targets."""
    n_max = max([1] + [int(s.shape[0]) for s in segments])
    out = torch.zeros(len(segments), n_max, 2, device=device)
    valid = torch.zeros(len(segments), n_max, dtype=torch.bool, device=device)
    for i, seg in enumerate(segments):
        seg = torch.as_tensor(seg, dtype=torch.float32, device=device).reshape(-1, 2)
        out[i, : seg.shape[0]] = seg
        valid[i, : seg.shape[0]] = True
    return out, valid


def bmn_targets(gt_segments: Tensor, valid: Tensor, tscale: int, dscale: int, boundary_width: float = 3.0,
                anchor_offsets: tuple[float, float] = (-0.5, 1.5)) -> tuple[Tensor, Tensor, Tensor]:
    """Targets of one batch (MMAction2's ``BMN.generate_labels``, batched).

    * IoU map: cell ``[d, s]`` is the proposal ``[s / T, (s + d + 1) / T]``; its target is its largest temporal
      IoU with a ground-truth segment.
    * Start (end) target at position ``i``: the largest fraction of anchor
      ``[(i + anchor_offsets[0]) / T, (i + anchor_offsets[1]) / T]`` covered by a region of ``boundary_width / T``
      centred on a ground-truth start (end). MMAction2's (and the original BMN code's) anchors are
      ``(i - 0.5) / T .. (i + 1.5) / T``.

    Args:
        gt_segments: float [B, N, 2], (start, end) in normalised time [0, 1].
        valid: bool [B, N], False on padding (which then contributes 0).
        tscale, dscale: T and D.
        boundary_width: width of the region around a boundary, in positions (BMN: 3).
        anchor_offsets: the anchors' start and end offsets, in positions.

    Returns:
        (iou_map float32 [B, D, T], start float32 [B, T], end float32 [B, T]), all in [0, 1].
    """
    device = gt_segments.device
    gap = 1.0 / tscale
    g0 = gt_segments[..., 0][:, :, None, None]  # [B, N, 1, 1]
    g1 = gt_segments[..., 1][:, :, None, None]
    s = torch.arange(tscale, device=device, dtype=torch.float32)
    d = torch.arange(dscale, device=device, dtype=torch.float32)
    p0 = (s * gap).expand(dscale, tscale)  # [D, T]
    p1 = p0 + (d[:, None] + 1) * gap
    iou = segment_iou(p0, p1, g0, g1) * valid[:, :, None, None]  # [B, N, D, T]
    iou_map = iou.amax(dim=1)

    a0 = (s + anchor_offsets[0]) * gap  # [T]
    a1 = (s + anchor_offsets[1]) * gap
    half = boundary_width * gap / 2
    mask = valid[:, :, None]

    def boundary(centres: Tensor) -> Tensor:  # [B, N] -> [B, T]
        c = centres[:, :, None]
        return (segment_ioa(a0, a1, c - half, c + half) * mask).amax(dim=1)

    return iou_map, boundary(gt_segments[..., 0]), boundary(gt_segments[..., 1])
