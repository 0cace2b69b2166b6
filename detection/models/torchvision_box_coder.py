"""torchvision's ``BoxCoder`` as a registered box coder, for the ``torchvision`` R-CNN presets.

It encodes the same deltas as :class:`~detection.models.task_utils.DeltaXYWHBBoxCoder` (``weights`` are
``1 / target_stds``, means 0), with two differences that matter for giving torchvision's outputs from its
weights: deltas are divided by the weights (not multiplied by ``1 / weights``, which rounds differently), and
only ``dw``/``dh`` above ``log(1000 / 16)`` are clamped (MMDetection's coder also clamps below, so a box that
torchvision shrinks to zero width, and then drops as too small, keeps 1.6 % of its prior's width there).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from detection.models.task_utils.bbox_coder import centers_sizes
from detection.registry import TASK_UTILS

BBOX_XFORM_CLIP = math.log(1000.0 / 16)


@TASK_UTILS.register_module()
class TorchvisionBoxCoder:
    """Boxes <-> ``(dx, dy, dw, dh)`` deltas exactly as ``torchvision.models.detection._utils.BoxCoder``.

    Args:
        weights: ``(wx, wy, ww, wh)``: deltas are multiplied by them when encoding and divided when decoding
            (RPN ``(1, 1, 1, 1)``, RoI heads ``(10, 10, 5, 5)``).
        bbox_xform_clip: the largest ``dw``/``dh`` decoded (``log(1000 / 16)``).
        clip_border: clip decoded boxes to ``max_shape`` when it is given (torchvision clips in the heads).

    Attributes ``target_means`` (0) and ``target_stds`` (``1 / weights``) describe the same encoding in
    :class:`DeltaXYWHBBoxCoder`'s terms, for code that reads them (export).
    """

    def __init__(self, weights: Sequence[float] = (1.0, 1.0, 1.0, 1.0), bbox_xform_clip: float = BBOX_XFORM_CLIP,
                 clip_border: bool = True) -> None:
        vals = tuple(float(w) for w in weights)
        if len(vals) != 4 or min(vals) <= 0:
            raise ValueError(f"TorchvisionBoxCoder: weights must be 4 positive numbers (wx, wy, ww, wh), got "
                             f"{weights!r}")
        self.weights = vals
        self.bbox_xform_clip = float(bbox_xform_clip)
        self.clip_border = bool(clip_border)
        self.target_means = (0.0, 0.0, 0.0, 0.0)
        self.target_stds = tuple(1.0 / w for w in vals)

    def encode(self, bboxes: Tensor, gt_bboxes: Tensor) -> Tensor:
        """Deltas that move ``bboxes`` onto ``gt_bboxes`` (torchvision's ``encode_boxes``).

        Args:
            bboxes: ``[..., 4]`` priors (anchors or proposals), xyxy pixels.
            gt_bboxes: ``[..., 4]`` target boxes, broadcastable to ``bboxes``.

        Returns:
            ``[..., 4]`` float32 weighted deltas.
        """
        wx, wy, ww, wh = self.weights
        px, py, pw, ph = centers_sizes(bboxes)
        gx, gy, gw, gh = centers_sizes(gt_bboxes)
        return torch.stack([wx * (gx - px) / pw, wy * (gy - py) / ph, ww * torch.log(gw / pw),
                            wh * torch.log(gh / ph)], dim=-1)

    def decode(self, bboxes: Tensor, deltas: Tensor, max_shape: Sequence[int] | None = None) -> Tensor:
        """Boxes that ``deltas`` make of ``bboxes`` (torchvision's ``decode_single``).

        Args:
            bboxes: ``[..., 4]`` priors, xyxy pixels.
            deltas: ``[..., 4]`` weighted deltas, broadcastable with ``bboxes`` (priors ``[N, 1, 4]`` with
                class-specific deltas ``[N, C, 4]``).
            max_shape: ``(H, W)`` to clip to (when ``clip_border``); None: no clipping.

        Returns:
            ``[..., 4]`` float32 xyxy boxes.
        """
        d = deltas.float()
        wx, wy, ww, wh = self.weights
        px, py, pw, ph = centers_sizes(bboxes)
        dx, dy = d[..., 0] / wx, d[..., 1] / wy
        dw = torch.clamp(d[..., 2] / ww, max=self.bbox_xform_clip)
        dh = torch.clamp(d[..., 3] / wh, max=self.bbox_xform_clip)
        cx, cy = dx * pw + px, dy * ph + py
        half_w, half_h = 0.5 * (torch.exp(dw) * pw), 0.5 * (torch.exp(dh) * ph)
        boxes = torch.stack([cx - half_w, cy - half_h, cx + half_w, cy + half_h], dim=-1)
        if self.clip_border and max_shape is not None:
            h, w = float(max_shape[0]), float(max_shape[1])
            boxes = torch.stack([boxes[..., 0].clamp(0, w), boxes[..., 1].clamp(0, h),
                                 boxes[..., 2].clamp(0, w), boxes[..., 3].clamp(0, h)], dim=-1)
        return boxes

    def __repr__(self) -> str:
        return f"{type(self).__name__}(weights={self.weights}, bbox_xform_clip={self.bbox_xform_clip:.4f})"
