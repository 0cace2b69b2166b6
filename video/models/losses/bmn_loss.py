"""BMN's loss (Lin et al., ICCV 2019, section 3.5): temporal evaluation (start/end) + proposal evaluation
(regressed and classified IoU), as MMAction2's ``BMNLoss`` and PaddleVideo's, batch-wide."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from video.registry import MODELS


def weighted_binary_logistic(pred: Tensor, target: Tensor, mask: Tensor | None = None, threshold: float = 0.5,
                             ratio_range: tuple[float, float] = (1.05, 21.0), eps: float = 1e-5) -> Tensor:
    """Binary log loss that weighs positives and negatives equally, whatever their counts.

    Positives are ``target > threshold`` (inside ``mask``), negatives the rest of ``mask``. With
    ``ratio = entries / max(positives, 1)`` clamped to ``ratio_range``::

        loss = -sum(0.5 * ratio * log(p + eps) * pos + 0.5 * ratio / (ratio - 1) * log(1 - p + eps) * neg) / entries

    (``entries``: every element without a mask, ``max(positives, 1) + negatives`` with one), so that each class
    contributes half the loss when the ratio is inside its range (MMAction2's
    ``binary_logistic_regression_loss`` when ``mask`` is None, its ``pem_cls_loss`` with the BM mask).

    Args:
        pred: probabilities in (0, 1), any shape.
        target: same shape, in [0, 1] (soft targets are thresholded).
        mask: 0/1 of the same (or a broadcastable) shape; None: every entry.
        threshold, ratio_range, eps: as above.

    Returns:
        Tensor: scalar.
    """
    pos = (target > threshold).to(pred.dtype)
    if mask is None:
        neg = 1.0 - pos
    else:
        mask = mask.to(pred.dtype).expand_as(pred)
        pos = pos * mask
        neg = (target <= threshold).to(pred.dtype) * mask
    num_pos = pos.sum().clamp(min=1.0)
    # MMAction2: every entry without a mask, max(positives, 1) + negatives with one (differs only without positives)
    entries = pred.new_tensor(float(pred.numel())) if mask is None else num_pos + neg.sum()
    ratio = (entries / num_pos).clamp(*ratio_range)
    coef_pos = 0.5 * ratio
    coef_neg = 0.5 * ratio / (ratio - 1.0)
    loss = coef_pos * torch.log(pred + eps) * pos + coef_neg * torch.log(1.0 - pred + eps) * neg
    return -loss.sum() / entries


def balanced_iou_regression(pred: Tensor, target: Tensor, mask: Tensor, high: float = 0.7, low: float = 0.3,
                            rand: Tensor | None = None) -> Tensor:
    """Squared error on the BM map, with the medium and low IoU cells subsampled to the high cells' count.

    High: ``target > high``; medium: ``low < target <= high``; low: ``0 <= target <= low`` inside ``mask``
    (the original BMN code and PaddleVideo; MMAction2 skips exact zeros). Every high cell counts; a medium
    (low) cell counts with probability ``min(1, n_high / n_medium)`` (``n_high / n_low``), drawn from ``rand``.
    The reference writes that draw as ``rand * medium > 1 - ratio``, which also selects every non-medium cell
    (the invalid ones included) when the ratio exceeds 1; here a cell is drawn only from its own group. ::

        loss = 0.5 * sum(w * (pred - target) ** 2) / sum(w)

    Args:
        pred: float [B, D, T] regressed IoU.
        target: float [B, D, T] ground-truth IoU, already zero outside ``mask``.
        mask: 0/1 [D, T] (or broadcastable) valid cells.
        high, low: the IoU thresholds (BMN: 0.7, 0.3).
        rand: uniform [0, 1) draws of ``target``'s shape; None: ``torch.rand_like(target)``.

    Returns:
        Tensor: scalar (0 when no cell is selected).
    """
    mask = mask.to(pred.dtype).expand_as(pred) > 0
    hmask = (target > high) & mask
    mmask = (target <= high) & (target > low) & mask
    lmask = (target <= low) & (target >= 0) & mask
    num_h = hmask.sum().to(pred.dtype)
    r_m = num_h / mmask.sum().clamp(min=1)
    r_l = num_h / lmask.sum().clamp(min=1)
    if rand is None:
        rand = torch.rand_like(target)
    weights = (hmask | (mmask & (rand < r_m)) | (lmask & (rand < r_l))).to(pred.dtype)
    return 0.5 * (weights * (pred - target).square()).sum() / weights.sum().clamp(min=1.0)


@MODELS.register_module()
class BMNLoss(nn.Module):
    """BMN's three losses, each weighted, returned separately so that the log shows them (their sum is
    the total: ``tem + 10 * pem_reg + pem_cls`` at the default weights).

    Args:
        tem_weight, pem_reg_weight, pem_cls_weight: the weights (BMN: 1, 10, 1).
        high_iou, low_iou: the regression loss's IoU groups (0.7, 0.3).
        cls_threshold: IoU above which a BM cell is a positive for the classification loss (0.9).
        tem_threshold: start/end target above which a position is a positive (0.5).
    """

    def __init__(self, tem_weight: float = 1.0, pem_reg_weight: float = 10.0, pem_cls_weight: float = 1.0,
                 high_iou: float = 0.7, low_iou: float = 0.3, cls_threshold: float = 0.9,
                 tem_threshold: float = 0.5) -> None:
        super().__init__()
        self.tem_weight = tem_weight
        self.pem_reg_weight = pem_reg_weight
        self.pem_cls_weight = pem_cls_weight
        self.high_iou = high_iou
        self.low_iou = low_iou
        self.cls_threshold = cls_threshold
        self.tem_threshold = tem_threshold

    def tem_loss(self, pred_start: Tensor, pred_end: Tensor, gt_start: Tensor, gt_end: Tensor) -> Tensor:
        """Weighted binary logistic loss of the start and of the end probabilities ([B, T] each), summed."""
        return (weighted_binary_logistic(pred_start, gt_start, threshold=self.tem_threshold)
                + weighted_binary_logistic(pred_end, gt_end, threshold=self.tem_threshold))

    def forward(self, pred_bm: Tensor, pred_start: Tensor, pred_end: Tensor, gt_iou_map: Tensor, gt_start: Tensor,
                gt_end: Tensor, bm_mask: Tensor) -> dict[str, Tensor]:
        """
        Args:
            pred_bm: float [B, 2, D, T] (channel 0 regressed IoU, channel 1 classified IoU, both sigmoid).
            pred_start, pred_end: float [B, T] probabilities.
            gt_iou_map: float [B, D, T]; gt_start, gt_end: float [B, T] (from ``bmn_targets``).
            bm_mask: float [D, T], 1 on valid cells.

        Returns:
            dict: ``loss_tem``, ``loss_pem_reg``, ``loss_pem_cls`` (scalars, weighted).
        """
        gt_iou_map = gt_iou_map * bm_mask
        reg = balanced_iou_regression(pred_bm[:, 0], gt_iou_map, bm_mask, self.high_iou, self.low_iou)
        cls = weighted_binary_logistic(pred_bm[:, 1], gt_iou_map, bm_mask, threshold=self.cls_threshold)
        tem = self.tem_loss(pred_start, pred_end, gt_start, gt_end)
        return dict(loss_tem=self.tem_weight * tem, loss_pem_reg=self.pem_reg_weight * reg,
                    loss_pem_cls=self.pem_cls_weight * cls)
