"""Cross-entropy over the hard pixels only (online hard example mining, OHEM)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from segmentation.registry import MODELS

from .cross_entropy_loss import pixel_cross_entropy
from .utils import (
    check_logits_target,
    check_loss_name,
    check_loss_weight,
    class_weight_tensor,
    match_class_weight,
    safe_target,
    sum_ratio,
)


def ohem_keep_mask(
    logits: torch.Tensor, target: torch.Tensor, thresh: float, min_kept: int, ignore_index: int
) -> torch.Tensor:
    """Which pixels OHEM keeps: bool [B, H, W] (never an ignored pixel). No gradient flows through the choice.

    ``logits`` [B, C, H, W], ``target`` [B, H, W] int64. With ``p`` the softmax probability of each valid pixel's
    true class and ``k = min_kept * B``: the threshold is ``max(thresh, p_(k+1))``, ``p_(k+1)`` the (k+1)-th
    smallest ``p``, and a pixel is kept when ``p < threshold`` (mmseg's ``OHEMPixelSampler``). So every pixel the
    model is less sure of than ``thresh`` is kept, and at least the ``k`` hardest are whatever the threshold. When
    ``k`` reaches the number of valid pixels every valid pixel is kept (mmseg would still drop the easiest one).
    One ``kthvalue`` over the valid pixels, no sort of the whole image.
    """
    with torch.no_grad():
        safe, valid = safe_target(target, ignore_index, logits.shape[1])
        # at least float32 (AMP's half logits), and the threshold compared in the same dtype as the probabilities
        prob = logits.softmax(dim=1, dtype=torch.promote_types(logits.dtype, torch.float32))
        prob = prob.gather(1, safe.unsqueeze(1)).squeeze(1)  # [B, H, W]
        valid_prob = prob[valid]
        kept = min_kept * target.shape[0]
        if kept >= valid_prob.numel():
            return valid
        threshold = torch.kthvalue(valid_prob, kept + 1).values.clamp(min=thresh)
        return valid & (prob < threshold)


@MODELS.register_module()
class OhemCrossEntropyLoss(nn.Module):
    """Softmax cross-entropy averaged over the hard pixels that :func:`ohem_keep_mask` selects.

    Why: on street scenes most pixels (road, sky) are easy after a few thousand iterations and drown the
    gradient of thin and rare classes; OHEM spends the loss on the pixels whose true class gets a probability
    below ``thresh`` (0.7: PaddleSeg's and mmseg's Cityscapes setting), and on at least ``min_kept`` per image.

    Selection rule: mmseg's ``OHEMPixelSampler`` with ``thresh`` set (``min_kept`` counts per image, times the
    batch size; PaddleSeg's ``OhemCrossEntropyLoss`` counts ``min_kept`` over the whole batch and keeps one pixel
    fewer). Reduction: the mean over the kept pixels, weighted by ``class_weight`` as ``F.cross_entropy`` weights
    its mean (PaddleSeg's; mmseg divides by every pixel of the batch, so its loss shrinks as fewer are kept).
    A batch with no valid pixel gives a zero loss that still belongs to the graph.

    Args:
        thresh: keep pixels whose true-class probability is below this, in (0, 1].
        min_kept: per image, the least number of hardest pixels kept (>= 0).
        class_weight: [C] weights of the classes in the mean, or None.
        loss_weight: factor on the loss; loss_name: its key in the log (must contain 'loss').
    """

    def __init__(
        self,
        thresh: float = 0.7,
        min_kept: int = 100000,
        class_weight: Sequence[float] | None = None,
        loss_weight: float = 1.0,
        loss_name: str = "loss_ohem",
    ) -> None:
        super().__init__()
        owner = "OhemCrossEntropyLoss"
        self.loss_name = check_loss_name(owner, loss_name)
        self.loss_weight = check_loss_weight(owner, loss_weight)
        if not 0.0 < float(thresh) <= 1.0:
            raise ValueError(f"{owner} thresh must be in (0, 1] (a probability), got {thresh}")
        if isinstance(min_kept, bool) or int(min_kept) != min_kept or min_kept < 0:
            raise ValueError(f"{owner} min_kept must be an int >= 0 (pixels per image), got {min_kept!r}")
        self.thresh = float(thresh)
        self.min_kept = int(min_kept)
        self.register_buffer("class_weight", class_weight_tensor(owner, class_weight), persistent=False)

    def forward(self, logits: torch.Tensor, target: torch.Tensor, ignore_index: int = 255) -> torch.Tensor:
        """``logits`` [B, C, H, W] float, ``target`` [B, H, W] class ids -> weighted scalar loss."""
        check_logits_target("OhemCrossEntropyLoss", logits, target)
        target = target.long()
        weight = match_class_weight("OhemCrossEntropyLoss", self.class_weight, logits)
        keep = ohem_keep_mask(logits, target, self.thresh, self.min_kept, ignore_index)
        pixel_loss, pixel_weight = pixel_cross_entropy(logits, target, weight, ignore_index)
        keep = keep.to(pixel_loss.dtype)
        return self.loss_weight * sum_ratio(pixel_loss * keep, pixel_weight * keep)

    def extra_repr(self) -> str:
        return (f"thresh={self.thresh}, min_kept={self.min_kept}, loss_weight={self.loss_weight}, "
                f"loss_name={self.loss_name!r}")
