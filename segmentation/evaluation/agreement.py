"""Scores from confusion matrices that the per-class table does not hold: Cohen's kappa of a whole matrix and the
mean IoU of each image in a stack of per-image matrices (for the report's worst images)."""

from __future__ import annotations

import torch


def cohen_kappa(confusion: torch.Tensor) -> float:
    """Cohen's kappa of a [C, C] confusion matrix (rows ground truth, columns prediction), as a fraction.

    ``(p_o - p_e) / (1 - p_e)`` with ``p_o`` the diagonal fraction and ``p_e = sum_i gt_i pred_i / N^2`` the
    agreement expected by chance from the marginals. Unlike aAcc it does not reward predicting the dominant class
    everywhere (that gives kappa 0). NaN when nothing was counted or ``p_e == 1`` (one class everywhere in both).
    """
    cm = confusion.double()
    n = cm.sum()
    if n <= 0:
        return float('nan')
    p_o = cm.diag().sum() / n
    p_e = (cm.sum(1) * cm.sum(0)).sum() / (n * n)
    if p_e >= 1.0:
        return float('nan')
    return float((p_o - p_e) / (1.0 - p_e))


def per_image_miou(confusions: torch.Tensor) -> torch.Tensor:
    """Mean IoU of each image from its own matrix: [N, C, C] int counts -> [N] float64 fractions.

    A class counts in an image's mean when it is in that image's ground truth or prediction (IoU defined); an
    image with no counted pixel (all ignored) is NaN. One vectorised pass over the stack, no per-image loop.
    """
    if confusions.dim() != 3 or confusions.shape[1] != confusions.shape[2]:
        raise ValueError(f'per_image_miou: expected [N, C, C] confusion matrices, got {tuple(confusions.shape)}')
    cm = confusions.double()
    tp = cm.diagonal(dim1=1, dim2=2)
    union = cm.sum(2) + cm.sum(1) - tp
    present = union > 0
    iou = torch.where(present, tp / union.clamp(min=1), torch.zeros_like(tp))
    count = present.sum(1)
    return torch.where(count > 0, iou.sum(1) / count.clamp(min=1), torch.full_like(iou[:, 0], float('nan')))
