"""2D recognizer (TSN, TSM, C2D non-local): frames of every view folded into the batch of a 2D backbone."""

from __future__ import annotations

from typing import Any

import torch

from video.registry import MODELS

from .base import BaseRecognizer, ModuleCfg


@MODELS.register_module()
class Recognizer2D(BaseRecognizer):
    """Clips float [B, V*T, 3, H, W] (V views of T frames, views-major) -> backbone on [B*V*T, 3, H, W] -> head
    (consensus over T) -> [B*V, C] -> views averaged in the head.

    Args:
        num_segments: frames per view T. Default: the backbone's ``num_segments`` (TSM, non-local; a differing
            value here is refused) or, for a backbone without one (TSN), all the frames of a sample form one view
            (segmental consensus and averaging over views coincide for ``average_clips: score``).
        The rest: see :class:`BaseRecognizer`.
    """

    FORMAT_SHAPE = "NCHW"

    def __init__(self, backbone: ModuleCfg, cls_head: ModuleCfg, num_classes: int, num_segments: int | None = None,
                 **kwargs: Any) -> None:
        super().__init__(backbone, cls_head, num_classes, **kwargs)
        own = getattr(self.backbone, "num_segments", None)
        if num_segments is not None and (isinstance(num_segments, bool) or not isinstance(num_segments, int)
                                         or num_segments < 1):
            raise ValueError(f"Recognizer2D: num_segments must be a positive int or null, got {num_segments!r}")
        if own is not None and num_segments is not None and own != num_segments:
            raise ValueError(f"Recognizer2D: num_segments={num_segments} differs from the backbone's "
                             f"num_segments={own}; set it once, on the backbone")
        self.num_segments = num_segments if num_segments is not None else own

    def split_views(self, inputs: torch.Tensor) -> tuple[torch.Tensor, int, int]:
        if inputs.dim() != 5:
            raise ValueError(f"Recognizer2D: inputs must be [B, V*T, 3, H, W] (format_shape NCHW), got "
                             f"{tuple(inputs.shape)}")
        frames = inputs.shape[1]
        num_segs = frames if self.num_segments is None else self.num_segments
        if frames % num_segs:
            raise ValueError(f"Recognizer2D: {frames} frames per sample is not a multiple of num_segments="
                             f"{num_segs} (frames per view); sample num_clips x clip_len as the model expects")
        return inputs.reshape(-1, *inputs.shape[2:]), num_segs, frames // num_segs
