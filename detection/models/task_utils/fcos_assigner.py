"""FCOS's anchor-free assignment (Tian et al. 2019) of feature-map points to gt boxes, batched over images."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from detection.registry import TASK_UTILS

INF = math.inf


@TASK_UTILS.register_module()
class FCOSAssigner:
    """Each point takes the smallest-area gt box that it may regress (torchvision's ``FCOS.compute_loss``).

    A point ``p`` of level ``l`` (stride ``s``) may regress gt box ``g`` when all of:

    - it lies strictly inside ``g`` (all of ``l, t, r, b`` = distances to the box sides > 0);
    - with ``center_sampling``: ``max(|p_x - c_x|, |p_y - c_y|) < center_sampling_radius * s`` (``c``: the box
      centre; torchvision's rule, the same as MMDetection's centre box clipped to the gt box);
    - ``lo_l < max(l, t, r, b) < hi_l`` with ``(lo_l, hi_l) = regress_ranges[l]`` (strict, as torchvision).

    Among several such boxes the smallest area wins (the first on ties); points with none are background.

    Args:
        regress_ranges: per level ``(lo, hi)`` of the largest distance a point of that level regresses; ``inf``
            (YAML ``.inf``) for no upper bound.
        center_sampling: restrict positives to the centre region.
        center_sampling_radius: the centre region's half-size in strides.
    """

    def __init__(
        self,
        regress_ranges: Sequence[Sequence[float]] = ((-1, 64), (64, 128), (128, 256), (256, 512), (512, INF)),
        center_sampling: bool = True,
        center_sampling_radius: float = 1.5,
    ) -> None:
        ranges = [tuple(float(v) for v in r) for r in regress_ranges]
        if not ranges or any(len(r) != 2 or not r[0] < r[1] for r in ranges):
            raise ValueError(f"FCOSAssigner: regress_ranges must be (lo, hi) pairs with lo < hi, got "
                             f"{regress_ranges!r}")
        if center_sampling_radius <= 0:
            raise ValueError(f"FCOSAssigner: center_sampling_radius must be > 0, got {center_sampling_radius!r}")
        self.regress_ranges = ranges
        self.center_sampling = bool(center_sampling)
        self.center_sampling_radius = float(center_sampling_radius)

    def assign(self, points: Tensor, strides: Tensor, num_points_per_level: Sequence[int], gt_bboxes: Tensor,
               gt_valid: Tensor) -> Tensor:
        """Assign every point of every image.

        Args:
            points: float ``[N, 2]`` (x, y) input pixels, levels concatenated in order.
            strides: float ``[N]`` each point's stride (its level's).
            num_points_per_level: points of each level (``len(regress_ranges)`` levels, summing to N).
            gt_bboxes: float ``[B, M, 4]`` xyxy gt boxes, padded to the most boxes of an image.
            gt_valid: bool ``[B, M]``: real boxes (False for padding).

        Returns:
            int64 ``[B, N]``: index of the matched box in ``gt_bboxes[b]``, ``-1`` for background.
        """
        if len(num_points_per_level) != len(self.regress_ranges):
            raise ValueError(f"FCOSAssigner: {len(num_points_per_level)} levels but {len(self.regress_ranges)} "
                             f"regress_ranges")
        b, m = gt_bboxes.shape[:2]
        n = points.shape[0]
        if m == 0:
            return torch.full((b, n), -1, dtype=torch.long, device=points.device)
        ranges = torch.tensor(self.regress_ranges, dtype=points.dtype, device=points.device)
        level = torch.repeat_interleave(torch.arange(len(ranges), device=points.device),
                                        torch.as_tensor(list(num_points_per_level), device=points.device))
        lo, hi = ranges[level, 0], ranges[level, 1]  # [N]
        x, y = points[:, 0][None, :, None], points[:, 1][None, :, None]  # [1, N, 1]
        g = gt_bboxes.float()[:, None]  # [B, 1, M, 4]
        dist = torch.stack([x - g[..., 0], y - g[..., 1], g[..., 2] - x, g[..., 3] - y], dim=-1)  # [B, N, M, 4]
        match = (dist.min(dim=-1).values > 0) & gt_valid[:, None, :]
        if self.center_sampling:
            cx, cy = (g[..., 0] + g[..., 2]) / 2, (g[..., 1] + g[..., 3]) / 2  # [B, 1, M]
            off = torch.maximum((x - cx).abs(), (y - cy).abs())
            match &= off < self.center_sampling_radius * strides[None, :, None]
        far = dist.max(dim=-1).values
        match &= (far > lo[None, :, None]) & (far < hi[None, :, None])
        area = (g[..., 2] - g[..., 0]) * (g[..., 3] - g[..., 1])  # [B, 1, M]
        cost = torch.where(match, area.expand_as(far), torch.full_like(far, INF))
        best, idx = cost.min(dim=-1)  # first index on ties
        return torch.where(torch.isfinite(best), idx, torch.full_like(idx, -1))

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(regress_ranges={self.regress_ranges}, center_sampling={self.center_sampling},"
                f" center_sampling_radius={self.center_sampling_radius})")
