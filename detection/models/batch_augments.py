"""Augmentations of a whole batch on the device, run by ``DetDataPreprocessor`` in training only."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from detection.registry import MODELS
from oars.errors import OarsError


def _scale_instances(sample, sx: float, sy: float) -> None:
    for field in ("gt_instances", "ignored_instances"):
        if field in sample and "bboxes" in sample.get(field):
            inst = sample.get(field)
            inst.bboxes = inst.bboxes * inst.bboxes.new_tensor([sx, sy, sx, sy])


@MODELS.register_module()
class BatchRandomResize(nn.Module):
    """YOLOv3's multi-scale training: every ``interval`` batches pick a size ``s`` from ``sizes`` (or the multiples
    of ``size_divisor`` in ``size_range``), then resize each batch (bilinear, on the device) to ``s`` x ``s``, or
    with ``keep_ratio`` so that its long side is ``s`` (the short side rounded to a multiple of ``size_divisor``).
    Gt and ignored boxes are scaled by exactly the ratio the batch was scaled by; ``img_shape``,
    ``batch_input_shape``, ``pad_shape`` and ``scale_factor`` follow.

    Draws come from torch's global RNG (the engine checkpoints it); under torch.distributed rank 0's size is
    broadcast so that every rank trains at the same size. The batch counter and current size are a buffer,
    saved in checkpoints, so a resumed run picks the same sizes as an uninterrupted one.
    """

    def __init__(
        self,
        sizes: Sequence[int] | None = None,
        size_range: Sequence[int] = (320, 608),
        size_divisor: int = 32,
        interval: int = 1,
        keep_ratio: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(size_divisor, int) or size_divisor < 1:
            raise OarsError(f"BatchRandomResize.size_divisor must be a positive int, got {size_divisor!r}")
        if not isinstance(interval, int) or interval < 1:
            raise OarsError(f"BatchRandomResize.interval must be a positive int, got {interval!r}")
        if sizes is not None:
            candidates = tuple(int(s) for s in sizes)
            bad = [s for s in candidates if s < 1 or s % size_divisor]
            if not candidates or bad:
                raise OarsError(
                    f"BatchRandomResize.sizes must be positive multiples of size_divisor={size_divisor}, "
                    f"got {list(sizes)}"
                )
        else:
            if len(size_range) != 2 or not 0 < size_range[0] <= size_range[1]:
                raise OarsError(
                    f"BatchRandomResize.size_range must be (min, max) with 0 < min <= max, got {size_range!r}"
                )
            first = math.ceil(size_range[0] / size_divisor) * size_divisor
            candidates = tuple(range(first, int(size_range[1]) + 1, size_divisor))
            if not candidates:
                raise OarsError(
                    f"BatchRandomResize.size_range {tuple(size_range)} holds no multiple of size_divisor={size_divisor}"
                )
        self.sizes = candidates
        self.size_divisor = size_divisor
        self.interval = interval
        self.keep_ratio = keep_ratio
        # [batches seen, current size]; a buffer so it is checkpointed with the model (exact resume).
        self.register_buffer("state", torch.zeros(2, dtype=torch.long))

    def _draw(self, device: torch.device) -> int:
        size = self.sizes[int(torch.randint(len(self.sizes), (1,)))]
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            chosen = torch.tensor([size], dtype=torch.long, device=device)
            dist.broadcast(chosen, src=0)
            size = int(chosen.item())
        return size

    def _target(self, h: int, w: int, size: int) -> tuple[int, int]:
        if not self.keep_ratio:
            return size, size
        d = self.size_divisor
        ratio = size / max(h, w)
        return max(round(h * ratio / d), 1) * d, max(round(w * ratio / d), 1) * d

    def forward(self, inputs: torch.Tensor, data_samples: list | None) -> tuple[torch.Tensor, list | None]:
        count, size = (int(v) for v in self.state.tolist())
        if count % self.interval == 0 or size == 0:
            size = self._draw(inputs.device)
        self.state.copy_(torch.tensor([count + 1, size]))
        h, w = inputs.shape[-2:]
        new_h, new_w = self._target(h, w, size)
        sy, sx = new_h / h, new_w / w
        if (new_h, new_w) != (h, w):
            inputs = F.interpolate(inputs, size=(new_h, new_w), mode="bilinear", align_corners=False)
        for sample in data_samples or []:
            meta = sample.metainfo
            img_h, img_w = meta.get("img_shape", (h, w))
            update = dict(
                img_shape=(int(img_h * sy + 0.5), int(img_w * sx + 0.5)),
                batch_input_shape=(new_h, new_w),
                pad_shape=(new_h, new_w),
            )
            if "scale_factor" in meta:
                update["scale_factor"] = (meta["scale_factor"][0] * sx, meta["scale_factor"][1] * sy)
            sample.set_metainfo(update)
            if (new_h, new_w) != (h, w):
                _scale_instances(sample, sx, sy)
        return inputs, data_samples

    def extra_repr(self) -> str:
        return (
            f"sizes={list(self.sizes)}, size_divisor={self.size_divisor}, interval={self.interval}, "
            f"keep_ratio={self.keep_ratio}"
        )
