"""SSD's default boxes (Liu et al. 2016): per level two squares and a pair of boxes per aspect ratio, tiled over
the feature map, sized as fractions of the input (torchvision's ``DefaultBoxGenerator``)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from detection.registry import TASK_UTILS


@TASK_UTILS.register_module()
class SSDPriorGenerator:
    """Default boxes of SSD / SSDLite, computed with the same float32 arithmetic as torchvision's
    ``DefaultBoxGenerator`` (so a converted torchvision model sees bit-identical priors).

    Level ``k`` has scale ``s_k`` (a fraction of the input side) and ``2 + 2 * len(aspect_ratios[k])`` boxes per
    position, in this order: ``s_k x s_k``, ``s'_k x s'_k`` with ``s'_k = sqrt(s_k * s_{k+1})``, then for each
    ratio ``r`` the pair ``(s_k sqrt(r), s_k / sqrt(r))`` and its transpose (width, height). With ``clip`` the
    relative widths/heights are clipped to [0, 1] (no box wider than the input). Box centres are at
    ``(j + 0.5) * step`` pixels when ``steps`` are given (SSD300: 8, 16, 32, 64, 100, 300), else at the cell
    centres ``(j + 0.5) / W_k`` of the input (SSDLite). Relative boxes are scaled by the input's (W, H).

    Args:
        aspect_ratios: per level the ratios ``r >= 1`` (SSD300: ``[[2], [2, 3], [2, 3], [2, 3], [2], [2]]``).
        scales: ``L + 1`` scales as fractions of the input side (SSD300 COCO: 0.07, 0.15, ..., 1.05, i.e.
            MMDetection's min sizes 21, 45, 99, 153, 207, 261 and max sizes 45, ..., 315 at 300 px). None: spread
            linearly from ``min_ratio`` to ``max_ratio`` over the levels, then 1.0 (SSDLite: 0.2 .. 0.95).
        min_ratio, max_ratio: the scale range when ``scales`` is None.
        steps: per level the distance between box centres in pixels; None: input size / grid size.
        clip: clip relative widths and heights to [0, 1].
    """

    def __init__(
        self,
        aspect_ratios: Sequence[Sequence[float]],
        scales: Sequence[float] | None = None,
        min_ratio: float = 0.15,
        max_ratio: float = 0.9,
        steps: Sequence[float] | None = None,
        clip: bool = True,
    ) -> None:
        name = type(self).__name__
        self.aspect_ratios = [[float(r) for r in level] for level in aspect_ratios]
        num_levels = len(self.aspect_ratios)
        if num_levels == 0 or any(r < 1 for level in self.aspect_ratios for r in level):
            raise ValueError(f"{name}: aspect_ratios must be one list of ratios >= 1 per level, got {aspect_ratios!r}")
        if steps is not None and len(steps) != num_levels:
            raise ValueError(f"{name}: {len(steps)} steps for {num_levels} levels of aspect_ratios; give one per level")
        if scales is None:
            if not 0 < min_ratio < max_ratio:
                raise ValueError(f"{name}: need 0 < min_ratio < max_ratio, got {min_ratio!r}, {max_ratio!r}")
            if num_levels > 1:
                span = max_ratio - min_ratio
                scales = [min_ratio + span * k / (num_levels - 1.0) for k in range(num_levels)] + [1.0]
            else:
                scales = [min_ratio, max_ratio]
        if len(scales) != num_levels + 1 or min(scales) <= 0:
            raise ValueError(f"{name}: scales must be {num_levels + 1} positive numbers (one per level and the "
                             f"scale after the last), got {list(scales)!r}")
        self.scales = [float(s) for s in scales]
        self.steps = None if steps is None else [float(s) for s in steps]
        self.clip = bool(clip)
        self.wh_pairs = [self._wh_pairs(k) for k in range(num_levels)]

    @property
    def num_levels(self) -> int:
        return len(self.aspect_ratios)

    @property
    def num_base_priors(self) -> list[int]:
        """``A_k``: the boxes at one position of each level."""
        return [2 + 2 * len(level) for level in self.aspect_ratios]

    def _wh_pairs(self, k: int) -> Tensor:
        """``[A_k, 2]`` float32 relative (w, h) of level ``k``, in the order of the class docstring."""
        s_k = self.scales[k]
        s_prime = math.sqrt(self.scales[k] * self.scales[k + 1])
        pairs = [[s_k, s_k], [s_prime, s_prime]]
        for ratio in self.aspect_ratios[k]:
            sq = math.sqrt(ratio)
            pairs += [[s_k * sq, s_k / sq], [s_k / sq, s_k * sq]]
        wh = torch.as_tensor(pairs, dtype=torch.float32)
        return wh.clamp(min=0, max=1) if self.clip else wh

    def grid_priors(
        self,
        featmap_sizes: Sequence[tuple[int, int]],
        image_size: Sequence[int],
        device: torch.device | str = "cpu",
    ) -> Tensor:
        """Default boxes of every level, concatenated.

        Args:
            featmap_sizes: ``(H_k, W_k)`` of each level (python ints).
            image_size: ``(H, W)`` of the network input in pixels.
            device: of the result.

        Returns:
            ``[sum_k H_k * W_k * A_k, 4]`` float32 xyxy input pixels, ordered level, row, column, box (the order of
            ``head_output.permute(0, 2, 3, 1)`` flattened).
        """
        if len(featmap_sizes) != self.num_levels:
            raise ValueError(f"{type(self).__name__}: {len(featmap_sizes)} feature maps but {self.num_levels} levels "
                             "of aspect_ratios; the backbone's outputs and the prior generator must match")
        img_h, img_w = int(image_size[0]), int(image_size[1])
        boxes = []
        for k, (h, w) in enumerate(featmap_sizes):
            h, w = int(h), int(w)
            if self.steps is not None:
                x_f, y_f = img_w / self.steps[k], img_h / self.steps[k]
            else:
                x_f, y_f = float(w), float(h)
            shifts_x = ((torch.arange(0, w) + 0.5) / x_f).to(torch.float32)
            shifts_y = ((torch.arange(0, h) + 0.5) / y_f).to(torch.float32)
            shift_y, shift_x = torch.meshgrid(shifts_y, shifts_x, indexing="ij")
            num = len(self.wh_pairs[k])
            centers = torch.stack((shift_x.reshape(-1), shift_y.reshape(-1)) * num, dim=-1).reshape(-1, 2)
            boxes.append(torch.cat((centers, self.wh_pairs[k].repeat(h * w, 1)), dim=1))
        rel = torch.cat(boxes, dim=0)
        size = torch.tensor([img_w, img_h])
        xyxy = torch.cat([(rel[:, :2] - 0.5 * rel[:, 2:]) * size, (rel[:, :2] + 0.5 * rel[:, 2:]) * size], dim=-1)
        return xyxy.to(device)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(aspect_ratios={self.aspect_ratios}, scales={self.scales}, "
                f"steps={self.steps}, clip={self.clip})")
