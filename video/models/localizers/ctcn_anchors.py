"""C-TCN's temporal anchors (SSD-like default segments over time), their matching to ground-truth segments, and
the centre/width encoding of the regression targets (PaddleVideo's ``ctcn_utils.BoxCoder``, batched in torch).

Every time here is normalised to [0, 1] of the span the features cover. PaddleVideo works in positions of its
512-step input; IoU and the encoding are scale-free, so the targets are the same numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from video.localization import segment_iou
from video.registry import TASK_UTILS

VARIANCES = (0.1, 0.2)  # PaddleVideo's (and SSD's) scaling of the centre and width offsets


@TASK_UTILS.register_module()
class CTCNAnchorGenerator:
    """Default segments of every pyramid level: at each of the ``T / stride`` positions of a level, one anchor per
    entry of that level's ``widths`` (in multiples of the stride), centred on the position.

    PaddleVideo (T = 512, strides 4 .. 512) uses widths ``[1, 0.9, 1.1, 0.8, 1.2, 0.7, 1.3]`` of the stride at the
    seven finer levels and ``[1, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65]`` at the one-position top level (an anchor wider
    than the video cannot match better): 7 anchors x 255 positions = 1785.

    Args:
        strides: the positions of the input each level's step covers, finest first (C-TCN: 4, 8, ..., 512).
        widths: one list of width multipliers per level, in the order the head's output channels use.
    """

    def __init__(self, strides: Sequence[int], widths: Sequence[Sequence[float]]) -> None:
        self.strides = [int(s) for s in strides]
        self.widths = [[float(w) for w in level] for level in widths]
        if len(self.widths) != len(self.strides) or not self.strides:
            raise ValueError(f"CTCNAnchorGenerator: widths must give one list per level ({len(self.strides)} "
                             f"strides {self.strides}), got {len(self.widths)} lists")
        counts = {len(level) for level in self.widths}
        if len(counts) != 1 or 0 in counts:
            raise ValueError("CTCNAnchorGenerator: every level needs the same, non-zero number of anchor widths "
                             f"(one conv head serves all levels), got {[len(w) for w in self.widths]}")
        if any(w <= 0 for level in self.widths for w in level) or any(s <= 0 for s in self.strides):
            raise ValueError("CTCNAnchorGenerator: strides and widths must be positive")

    @property
    def num_anchors(self) -> int:
        """Anchors per position (the same at every level)."""
        return len(self.widths[0])

    def level_sizes(self, temporal_dim: int) -> list[int]:
        """Positions of each level for an input of ``temporal_dim`` steps (which every stride must divide).

        Raises:
            ValueError: a stride does not divide ``temporal_dim``.
        """
        bad = [s for s in self.strides if temporal_dim % s]
        if bad:
            raise ValueError(f"CTCNAnchorGenerator: temporal_dim={temporal_dim} must be a multiple of every stride "
                             f"{self.strides} (not of {bad}); resize the features to such a length")
        return [temporal_dim // s for s in self.strides]

    def __call__(self, temporal_dim: int) -> Tensor:
        """All anchors, level by level, position by position, then width by width (the head's order).

        Args:
            temporal_dim: T, the input's length in steps.

        Returns:
            Tensor: float32 [A, 2] (centre, width) in normalised time, ``A = num_anchors * sum(T / stride)``.
        """
        out = []
        for stride, size, widths in zip(self.strides, self.level_sizes(temporal_dim), self.widths):
            centre = (torch.arange(size, dtype=torch.float64) + 0.5) * stride / temporal_dim  # [P]
            width = torch.tensor(widths, dtype=torch.float64) * stride / temporal_dim  # [W]
            grid = torch.stack(torch.broadcast_tensors(centre[:, None], width[None, :]), dim=-1)  # [P, W, 2]
            out.append(grid.reshape(-1, 2))
        return torch.cat(out).float()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(strides={self.strides}, widths={self.widths})"


def to_start_end(segments: Tensor) -> Tensor:
    """(centre, width) [..., 2] -> (start, end) [..., 2]."""
    half = segments[..., 1:2] / 2
    return torch.cat([segments[..., 0:1] - half, segments[..., 0:1] + half], dim=-1)


def encode(segments: Tensor, anchors: Tensor) -> Tensor:
    """Regression targets of segments against their anchors (SSD's centre offset, but a linear width ratio as
    PaddleVideo's coder, not SSD's log).

    Args:
        segments: float [..., A, 2] (start, end).
        anchors: float [A, 2] (centre, width).

    Returns:
        Tensor: float [..., A, 2]: ``((c - c_a) / w_a / 0.1, (w / w_a - 1) / 0.2)``.
    """
    centre = (segments[..., 0] + segments[..., 1]) / 2
    width = segments[..., 1] - segments[..., 0]
    return torch.stack([(centre - anchors[:, 0]) / anchors[:, 1] / VARIANCES[0],
                        (width / anchors[:, 1] - 1.0) / VARIANCES[1]], dim=-1)


def decode(offsets: Tensor, anchors: Tensor) -> Tensor:
    """The inverse of :func:`encode`.

    Args:
        offsets: float [..., A, 2] (the loc head's output).
        anchors: float [A, 2] (centre, width).

    Returns:
        Tensor: float [..., A, 2] (start, end) in normalised time (not clipped).
    """
    centre = offsets[..., 0] * VARIANCES[0] * anchors[:, 1] + anchors[:, 0]
    width = (offsets[..., 1] * VARIANCES[1] + 1.0) * anchors[:, 1]
    return torch.stack([centre - width / 2, centre + width / 2], dim=-1)


def match_anchors(anchors: Tensor, gt_segments: Tensor, valid: Tensor, pos_iou: float = 0.5) -> Tensor:
    """Which ground-truth segment each anchor regresses, as PaddleVideo's ``BoxCoder.encode``, for a whole batch.

    1. Bipartite step: repeatedly take the (anchor, segment) pair of largest IoU still free, assign it, and strike
       its anchor and its segment (so every segment that overlaps any anchor gets its best one, even below
       ``pos_iou``); stops when the largest IoU left is below 1e-6. One step per segment, each over the batch.
    2. Every anchor still free whose best IoU is at least ``pos_iou`` takes that segment. (PaddleVideo skips this
       step when exactly one anchor qualifies, a quirk of its ``np.squeeze(...).size > 1`` test; not kept.)

    Args:
        anchors: float [A, 2] (centre, width).
        gt_segments: float [B, N, 2] (start, end), padded.
        valid: bool [B, N], False on padding.
        pos_iou: the IoU from which a free anchor becomes positive (0.5).

    Returns:
        Tensor: int64 [B, A], the matched segment's index, -1 for background.
    """
    boxes = to_start_end(anchors)  # [A, 2]
    iou = segment_iou(boxes[None, :, None, 0], boxes[None, :, None, 1],
                      gt_segments[:, None, :, 0], gt_segments[:, None, :, 1])  # [B, A, N]
    iou = iou * valid[:, None, :]
    b, a, n = iou.shape
    index = torch.full((b, a), -1, dtype=torch.long, device=iou.device)
    free = iou.clone()
    rows = torch.arange(b, device=iou.device)
    for _ in range(n):
        best, flat = free.reshape(b, -1).max(dim=1)
        hit = best >= 1e-6
        if not bool(hit.any()):
            break
        anchor, seg = flat // n, flat % n
        index[rows[hit], anchor[hit]] = seg[hit]
        free[rows[hit], anchor[hit], :] = 0
        free[rows[hit], :, seg[hit]] = 0
    best, arg = iou.max(dim=2)
    late = (index < 0) & (best >= pos_iou)
    return torch.where(late, arg, index)


def anchor_targets(anchors: Tensor, gt_segments: Tensor, gt_labels: Tensor, valid: Tensor,
                   pos_iou: float = 0.5) -> tuple[Tensor, Tensor]:
    """Training targets of a batch: the encoded segment and the class of every anchor.

    Args:
        anchors: float [A, 2] (centre, width).
        gt_segments: float [B, N, 2] (start, end), padded.
        gt_labels: int64 [B, N] foreground class ids in ``[0, num_classes)``, padded.
        valid: bool [B, N].
        pos_iou: see :func:`match_anchors`.

    Returns:
        (loc_targets float32 [B, A, 2], cls_targets int64 [B, A]): class id + 1 on matched anchors, 0
        (background) elsewhere; loc targets of background anchors are meaningless (the loss masks them).
    """
    index = match_anchors(anchors, gt_segments, valid, pos_iou)
    safe = index.clamp(min=0)
    matched = torch.gather(gt_segments, 1, safe[..., None].expand(-1, -1, 2))  # [B, A, 2]
    labels = torch.gather(gt_labels, 1, safe) + 1
    cls_targets = torch.where(index >= 0, labels, torch.zeros_like(labels))
    return encode(matched, anchors).float(), cls_targets
