"""SSD's online hard negative mining: per image, keep only the negatives with the highest classification loss."""

from __future__ import annotations

import torch
from torch import Tensor


def hard_negative_mask(cls_loss: Tensor, positive: Tensor, negative: Tensor, neg_pos_ratio: float) -> Tensor:
    """The hardest negatives of each image, ``neg_pos_ratio`` times as many as its positives.

    SSD trains its softmax classifier on all positives and only the ``floor(neg_pos_ratio * num_pos)`` negatives
    with the largest loss (3:1), so that the thousands of easy background priors do not swamp the loss. Done for
    the whole batch at once: the negatives' losses are sorted per image and a prior is kept when its rank is below
    its image's quota (torchvision's ``SSD.compute_loss``; MMDetection's ``topk``). An image without positives
    contributes no negatives. Ties are broken by the sort's order.

    Args:
        cls_loss: ``[B, N]`` float, each prior's classification loss against its target (background for
            negatives).
        positive: ``[B, N]`` bool, matched priors.
        negative: ``[B, N]`` bool, priors that may be used as negatives (not positive, not ignored).
        neg_pos_ratio: negatives per positive.

    Returns:
        ``[B, N]`` bool: the selected negatives (a subset of ``negative``).
    """
    if cls_loss.dim() != 2 or positive.shape != cls_loss.shape or negative.shape != cls_loss.shape:
        raise ValueError(f"hard_negative_mask: cls_loss, positive and negative must all be [B, N], got "
                         f"{tuple(cls_loss.shape)}, {tuple(positive.shape)}, {tuple(negative.shape)}")
    quota = (positive.sum(dim=1, keepdim=True) * float(neg_pos_ratio)).floor()
    quota = torch.minimum(quota, negative.sum(dim=1, keepdim=True).to(quota.dtype))
    loss = cls_loss.detach().float().masked_fill(~negative, float("-inf"))
    order = loss.argsort(dim=1, descending=True)
    rank = order.argsort(dim=1)
    return (rank < quota) & negative
