"""C-TCN's loss (PaddleVideo ``fpn_ctcn.FPNCTCN.loss``): SSD's multibox loss over temporal anchors, softmax
cross-entropy with hard negative mining plus smooth-L1 on the encoded centre/width of positive anchors."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from video.registry import MODELS


def hard_negatives(cls_loss: Tensor, positive: Tensor, neg_pos_ratio: float) -> Tensor:
    """The background anchors whose classification loss ranks among the ``neg_pos_ratio * positives`` highest of
    their video (SSD's hard negative mining: most anchors are easy background, which would swamp the loss).

    Args:
        cls_loss: float [B, A] per-anchor cross-entropy.
        positive: bool [B, A].
        neg_pos_ratio: negatives kept per positive (3).

    Returns:
        Tensor: bool [B, A], True on the kept negatives (never on a positive).
    """
    ranked = cls_loss.detach().masked_fill(positive, float("-inf"))
    order = ranked.argsort(dim=1, descending=True)
    rank = order.argsort(dim=1)
    quota = (neg_pos_ratio * positive.sum(dim=1, keepdim=True)).floor().long()  # [B, 1]
    return (rank < quota) & ~positive


@MODELS.register_module()
class CTCNLoss(nn.Module):
    """``loss_loc = loc_weight * smooth_l1(positives) / P`` and ``loss_cls = (CE(positives) + CE(hard
    negatives)) / P``, with ``P`` the positive anchors of the whole batch (at least 1); their sum is PaddleVideo's
    total loss (``loc_weight`` 2, 3 negatives per positive, smooth-L1 with its knee at 1).

    Args:
        loc_weight: weight of the regression term (PaddleVideo's ``alpha`` = 2).
        neg_pos_ratio: hard negatives per positive, per video (3).
        beta: the smooth-L1 knee (1: PaddleVideo's ``sigma`` = 1).
    """

    def __init__(self, loc_weight: float = 2.0, neg_pos_ratio: float = 3.0, beta: float = 1.0) -> None:
        super().__init__()
        if neg_pos_ratio < 0 or loc_weight < 0 or beta <= 0:
            raise ValueError(f"CTCNLoss: loc_weight ({loc_weight}) and neg_pos_ratio ({neg_pos_ratio}) must be "
                             f">= 0 and beta ({beta}) > 0")
        self.loc_weight, self.neg_pos_ratio, self.beta = loc_weight, neg_pos_ratio, beta

    def forward(self, loc_pred: Tensor, cls_logits: Tensor, loc_targets: Tensor, cls_targets: Tensor
                ) -> dict[str, Tensor]:
        """
        Args:
            loc_pred: float [B, A, 2] encoded (centre, width) offsets.
            cls_logits: float [B, A, K + 1] (background first).
            loc_targets: float [B, A, 2] (from :func:`anchor_targets`).
            cls_targets: int64 [B, A], 0 background, ``k + 1`` class k.

        Returns:
            ``{'loss_loc': scalar, 'loss_cls': scalar}``.
        """
        positive = cls_targets > 0
        num_pos = positive.sum().clamp(min=1).to(loc_pred.dtype)
        loc = F.smooth_l1_loss(loc_pred, loc_targets, reduction="none", beta=self.beta).sum(dim=-1)
        loss_loc = (loc * positive).sum() / num_pos
        ce = F.cross_entropy(cls_logits.flatten(0, 1), cls_targets.flatten(), reduction="none").view_as(cls_targets)
        selected = positive | hard_negatives(ce, positive, self.neg_pos_ratio)
        loss_cls = (ce * selected).sum() / num_pos
        return {"loss_loc": self.loc_weight * loss_loc, "loss_cls": loss_cls}
