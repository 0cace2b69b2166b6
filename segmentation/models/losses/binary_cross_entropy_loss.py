"""Binary cross-entropy for one-class (foreground / background) masks."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from segmentation.registry import MODELS

from .utils import check_logits_target, check_loss_name, check_loss_weight, sum_ratio


def foreground_logit(logits: torch.Tensor, owner: str) -> torch.Tensor:
    """The log-odds of foreground per pixel, [B, H, W], from [B, 1, H, W] or [B, 2, H, W] logits.

    One channel is the foreground logit itself. With two (what ``EncoderDecoder``, which needs
    ``num_classes >= 2``, gives) it is ``l1 - l0``: the log-odds under the softmax whose argmax the segmentor
    predicts with, so training this logit moves exactly the decision ``predict`` takes. Training ``l1`` alone
    would leave ``l0`` at its initial, arbitrary value and the argmax meaningless.
    """
    channels = logits.shape[1]
    if channels == 1:
        return logits[:, 0]
    if channels == 2:
        return logits[:, 1] - logits[:, 0]
    raise ValueError(f"{owner} is for one-class masks: logits need 1 channel (foreground) or 2 (background, "
                     f"foreground), got {channels}; use CrossEntropyLoss or FocalLoss for {channels} classes")


@MODELS.register_module()
class BinaryCrossEntropyLoss(nn.Module):
    """Sigmoid binary cross-entropy of the foreground logit (:func:`foreground_logit`) against 0/1 labels.

    Targets are [B, H, W] ids 0 (background) or 1 (foreground); ``ignore_index`` pixels do not count and any
    other value is a ValueError. The mean is over valid pixels (``F.binary_cross_entropy_with_logits`` on them).

    Why, next to 2-class CrossEntropyLoss: ``pos_weight`` (> 1 when foreground is rare: the foreground term is
    multiplied by it, as in ``F.binary_cross_entropy_with_logits``, and the mean stays over pixels, not weights)
    and heads with one output channel. With ``pos_weight=None`` and 2 channels the value is the 2-class
    cross-entropy (``log(1 + e^(l0 - l1))`` is the softmax's ``-log p1``).

    What works with our heads: ``EncoderDecoder`` with ``num_classes: 2`` and this loss on the decode head (the
    logit difference is trained, ``predict``'s argmax uses the same decision, mIoU and export are unchanged).
    A head built alone with ``num_classes=1`` trains too, but its ``acc_seg`` (an argmax over one channel) is
    meaningless and ``EncoderDecoder`` rejects ``num_classes: 1``.
    """

    def __init__(
        self, pos_weight: float | None = None, loss_weight: float = 1.0, loss_name: str = "loss_bce"
    ) -> None:
        super().__init__()
        self.loss_name = check_loss_name("BinaryCrossEntropyLoss", loss_name)
        self.loss_weight = check_loss_weight("BinaryCrossEntropyLoss", loss_weight)
        if pos_weight is not None and not float(pos_weight) > 0:
            raise ValueError(f"BinaryCrossEntropyLoss pos_weight must be > 0 (or null), got {pos_weight}")
        weight = None if pos_weight is None else torch.tensor(float(pos_weight))
        self.register_buffer("pos_weight", weight, persistent=False)

    def forward(self, logits: torch.Tensor, target: torch.Tensor, ignore_index: int = 255) -> torch.Tensor:
        """``logits`` [B, 1 or 2, H, W] float, ``target`` [B, H, W] ids in {0, 1, ignore_index} -> scalar loss."""
        check_logits_target("BinaryCrossEntropyLoss", logits, target)
        z = foreground_logit(logits, "BinaryCrossEntropyLoss")
        target = target.long()
        valid = target != ignore_index
        if bool(((target > 1) | (target < 0))[valid].any()):
            bad = torch.unique(target[valid & ((target > 1) | (target < 0))])[:10].tolist()
            raise ValueError(f"BinaryCrossEntropyLoss expects labels 0 (background), 1 (foreground) or ignore_index "
                             f"{ignore_index}, got {bad}")
        pos_weight = None if self.pos_weight is None else self.pos_weight.to(z.dtype)
        pixel_loss = F.binary_cross_entropy_with_logits(
            z, target.clamp(0, 1).to(z.dtype), pos_weight=pos_weight, reduction="none")
        valid = valid.to(pixel_loss.dtype)
        return self.loss_weight * sum_ratio(pixel_loss * valid, valid)

    def extra_repr(self) -> str:
        pos = None if self.pos_weight is None else float(self.pos_weight)
        return f"pos_weight={pos}, loss_weight={self.loss_weight}, loss_name={self.loss_name!r}"
