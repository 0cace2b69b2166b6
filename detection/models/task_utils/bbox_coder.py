"""Box regression targets as (dx, dy, dw, dh) deltas of a prior box: the R-CNN parameterisation."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from detection.registry import TASK_UTILS


def centers_sizes(boxes: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``(cx, cy, w, h)`` of xyxy ``boxes [..., 4]``, each ``[...]`` float32: ``w = x2 - x1`` (no +1) and
    ``cx = x1 + w / 2``, the arithmetic both MMDetection's and torchvision's coders use (so one serves both)."""
    b = boxes.float()
    w, h = b[..., 2] - b[..., 0], b[..., 3] - b[..., 1]
    return b[..., 0] + 0.5 * w, b[..., 1] + 0.5 * h, w, h


def _four(name: str, values: Sequence[float]) -> tuple[float, float, float, float]:
    vals = tuple(float(v) for v in values)
    if len(vals) != 4:
        raise ValueError(f"DeltaXYWHBBoxCoder: {name} must be 4 numbers (x, y, w, h), got {values!r}")
    return vals  # type: ignore[return-value]


@TASK_UTILS.register_module()
class DeltaXYWHBBoxCoder:
    """Encode a gt box against a prior as ``((gx - px) / pw, (gy - py) / ph, log(gw / pw), log(gh / ph))``,
    normalised by ``(delta - target_means) / target_stds``; decode inverts it.

    The same numbers as MMDetection's coder and torchvision's ``BoxCoder`` (whose ``weights`` are
    ``1 / target_stds``): widths are ``x2 - x1`` without a +1. Decoding clamps ``dw``/``dh`` to
    ``[-|log(wh_ratio_clip)|, |log(wh_ratio_clip)|]`` so that an early, wild prediction cannot overflow ``exp``
    (as MMDetection; torchvision clamps only from above at ``bbox_xform_clip`` = log(1000 / 16), so the two
    differ only for boxes shrunk more than 62.5 times). Encoding treats widths and heights below ``eps`` as
    ``eps``, so a degenerate gt box gives a large but finite target instead of NaN. Both run in float32
    whatever the input dtype (autocast-safe).

    Args:
        target_means, target_stds: per-coordinate normalisation (RPN: stds 1; RoI heads: 0.1, 0.1, 0.2, 0.2).
        clip_border: clip decoded boxes to ``max_shape`` when it is given.
        wh_ratio_clip: the smallest allowed scale change; its log bounds ``dw``/``dh``.
        eps: the least width/height used when encoding (degenerate boxes).
    """

    def __init__(
        self,
        target_means: Sequence[float] = (0.0, 0.0, 0.0, 0.0),
        target_stds: Sequence[float] = (1.0, 1.0, 1.0, 1.0),
        clip_border: bool = True,
        wh_ratio_clip: float = 16 / 1000,
        eps: float = 1e-6,
    ) -> None:
        self.target_means = _four("target_means", target_means)
        self.target_stds = _four("target_stds", target_stds)
        if min(self.target_stds) <= 0:
            raise ValueError(f"DeltaXYWHBBoxCoder: target_stds must be > 0, got {list(target_stds)}")
        if not 0 < wh_ratio_clip < 1:
            raise ValueError(f"DeltaXYWHBBoxCoder: wh_ratio_clip must be in (0, 1), got {wh_ratio_clip!r}")
        self.clip_border = clip_border
        self.eps = float(eps)
        self.max_ratio = abs(math.log(wh_ratio_clip))

    def _stats(self, ref: Tensor) -> tuple[Tensor, Tensor]:
        means = torch.tensor(self.target_means, dtype=torch.float32, device=ref.device)
        stds = torch.tensor(self.target_stds, dtype=torch.float32, device=ref.device)
        return means, stds

    def encode(self, bboxes: Tensor, gt_bboxes: Tensor) -> Tensor:
        """Deltas that move ``bboxes`` onto ``gt_bboxes``.

        Args:
            bboxes: ``[..., 4]`` priors (anchors or proposals), xyxy pixels.
            gt_bboxes: ``[..., 4]`` target boxes, broadcastable to ``bboxes``.

        Returns:
            ``[..., 4]`` float32 normalised deltas.
        """
        px, py, pw, ph = centers_sizes(bboxes)
        gx, gy, gw, gh = centers_sizes(gt_bboxes)
        pw, ph, gw, gh = (v.clamp(min=self.eps) for v in (pw, ph, gw, gh))
        deltas = torch.stack([(gx - px) / pw, (gy - py) / ph, torch.log(gw / pw), torch.log(gh / ph)], dim=-1)
        means, stds = self._stats(deltas)
        return (deltas - means) / stds

    def decode(self, bboxes: Tensor, deltas: Tensor, max_shape: Sequence[int] | None = None) -> Tensor:
        """Boxes that ``deltas`` make of ``bboxes``.

        Args:
            bboxes: ``[..., 4]`` priors, xyxy pixels.
            deltas: ``[..., 4]`` normalised deltas, broadcastable with ``bboxes`` (e.g. priors ``[N, 1, 4]``
                with class-specific deltas ``[N, C, 4]``).
            max_shape: ``(H, W)`` to clip to (when ``clip_border``); None: no clipping.

        Returns:
            ``[..., 4]`` float32 xyxy boxes.
        """
        means, stds = self._stats(deltas)
        d = deltas.float() * stds + means
        px, py, pw, ph = centers_sizes(bboxes)
        dw = d[..., 2].clamp(min=-self.max_ratio, max=self.max_ratio)
        dh = d[..., 3].clamp(min=-self.max_ratio, max=self.max_ratio)
        gw, gh = pw * dw.exp(), ph * dh.exp()
        gx, gy = px + pw * d[..., 0], py + ph * d[..., 1]
        boxes = torch.stack([gx - 0.5 * gw, gy - 0.5 * gh, gx + 0.5 * gw, gy + 0.5 * gh], dim=-1)
        if self.clip_border and max_shape is not None:
            h, w = float(max_shape[0]), float(max_shape[1])
            boxes = torch.stack([boxes[..., 0].clamp(0, w), boxes[..., 1].clamp(0, h),
                                 boxes[..., 2].clamp(0, w), boxes[..., 3].clamp(0, h)], dim=-1)
        return boxes

    def __repr__(self) -> str:
        return f"{type(self).__name__}(target_means={self.target_means}, target_stds={self.target_stds})"
