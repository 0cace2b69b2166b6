"""The part every decode head shares: input selection, classifier, losses and upsampling."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from oars.models.building import check_num_classes
from segmentation.registry import MODELS

from ..utils import resize

LossSpec = dict[str, Any] | Sequence[dict[str, Any]]


def select_in_channels(in_channels: int | Sequence[int], in_index: int | Sequence[int], owner: str) -> Any:
    """The channel count(s) of the inputs a head picks.

    ``in_channels`` is either an int (the channels of the single input picked by an int ``in_index``)
    or the list of channels of *every* feature map the backbone/neck returns (what segmentors pass
    by default), indexed by ``in_index`` (negative indices allowed).
    """
    if isinstance(in_channels, int):
        if not isinstance(in_index, int):
            raise ValueError(
                f"{owner}: in_index={list(in_index)} selects several inputs, so in_channels must be the list "
                f"of channels of every input feature, got the int {in_channels}"
            )
        return in_channels
    channels = list(in_channels)
    indices = [in_index] if isinstance(in_index, int) else list(in_index)
    for i in indices:
        if not -len(channels) <= i < len(channels):
            raise ValueError(
                f"{owner}: in_index {i} is out of range for {len(channels)} input features (in_channels={channels})"
            )
    picked = [channels[i] for i in indices]
    return picked[0] if isinstance(in_index, int) else picked


class BaseDecodeHead(nn.Module):
    """Picks input features with ``in_index``, maps them to ``channels`` (subclasses' ``forward_features``)
    and classifies with a 1x1 ``conv_seg`` after dropout.

    Logits come out at the head's own resolution; ``loss`` and ``predict`` upsample them to the label /
    requested size. ``loss_decode`` is one loss config or a list of them; each adds its own key.
    """

    def __init__(
        self,
        in_channels: int | Sequence[int],
        channels: int,
        num_classes: int,
        in_index: int | Sequence[int] = -1,
        dropout_ratio: float = 0.1,
        norm: Any = "BN",
        align_corners: bool = False,
        ignore_index: int = 255,
        loss_decode: LossSpec | None = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        check_num_classes(name, num_classes)
        if not isinstance(in_index, int):
            in_index = [int(i) for i in in_index]
        self.in_index = in_index
        self.in_channels = select_in_channels(in_channels, in_index, name)
        self.channels = channels
        self.num_classes = num_classes
        self.norm = norm
        self.align_corners = align_corners
        self.ignore_index = ignore_index
        self.dropout = nn.Dropout(dropout_ratio) if dropout_ratio > 0 else nn.Identity()
        # PyTorch's default init (as torchvision's heads). mmseg's normal(0, 0.01) left the classifier
        # stuck predicting the majority class for hundreds of AdamW steps on the demo data.
        self.conv_seg = nn.Conv2d(channels, num_classes, kernel_size=1)
        self.loss_decode = self._build_losses(loss_decode)

    def _build_losses(self, loss_decode: LossSpec | None) -> nn.ModuleList:
        if loss_decode is None:
            loss_decode = dict(type="CrossEntropyLoss")
        cfgs = [loss_decode] if isinstance(loss_decode, dict) else list(loss_decode)
        losses = nn.ModuleList(MODELS.build(cfg) for cfg in cfgs)
        names = [getattr(loss, "loss_name", None) for loss in losses]
        if None in names or len(set(names)) != len(names):
            raise ValueError(
                f"{type(self).__name__}: every loss in loss_decode needs a distinct loss_name, got {names}"
            )
        return losses

    def _transform_inputs(self, inputs: Sequence[torch.Tensor]) -> torch.Tensor | list[torch.Tensor]:
        if isinstance(self.in_index, int):
            return inputs[self.in_index]
        return [inputs[i] for i in self.in_index]

    def forward_features(self, x: Any) -> torch.Tensor:
        """Selected input(s) -> [B, channels, h, w] features; implemented by subclasses."""
        raise NotImplementedError

    def cls_seg(self, feat: torch.Tensor) -> torch.Tensor:
        return self.conv_seg(self.dropout(feat))

    def forward(self, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
        """All backbone/neck features -> logits [B, num_classes, h, w] at the head's resolution."""
        return self.cls_seg(self.forward_features(self._transform_inputs(inputs)))

    def loss(self, logits: torch.Tensor, gt: torch.Tensor) -> dict[str, torch.Tensor]:
        """Losses of ``logits`` against ``gt`` ([B, H, W] or [B, 1, H, W] class ids), plus pixel accuracy."""
        if gt.dim() == 4:
            gt = gt.squeeze(1)
        logits = resize(logits, gt.shape[-2:], self.align_corners)
        gt = gt.long()
        out: dict[str, torch.Tensor] = {}
        for loss_fn in self.loss_decode:
            out[loss_fn.loss_name] = loss_fn(logits, gt, ignore_index=self.ignore_index)
        with torch.no_grad():
            valid = gt != self.ignore_index
            correct = (logits.argmax(1) == gt) & valid
            out["acc_seg"] = correct.sum().float() / valid.sum().clamp(min=1).float()  # a fraction, as every metric
        return out

    def predict(self, inputs: Sequence[torch.Tensor], size: Sequence[int]) -> torch.Tensor:
        """Logits upsampled (bilinearly) to ``size`` (H, W)."""
        return resize(self.forward(inputs), size, self.align_corners)
