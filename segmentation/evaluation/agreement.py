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


def batch_confusions(preds: list[torch.Tensor], gts: list[torch.Tensor], num_classes: int,
                     ignore_index: int | None = 255) -> torch.Tensor:
    """Each image's [C, C] matrix (rows GT, columns prediction) in one bincount: [N, C, C] int64.

    ``preds[i]`` / ``gts[i]``: class ids of image i (any shape, equal sizes; images may differ in size). Pixels whose
    GT is ``ignore_index`` are skipped; ids outside 0..C-1 raise ValueError (as ``oars.evaluation.confusion_matrix``,
    which this equals image by image). The image index is folded into the bincount key, so a batch costs one pass.
    """
    if len(preds) != len(gts) or not preds:
        raise ValueError(f'batch_confusions: {len(preds)} predictions and {len(gts)} label maps (need equal, > 0)')
    for i, (p, g) in enumerate(zip(preds, gts)):
        if p.numel() != g.numel():
            raise ValueError(f'batch_confusions: image {i}: prediction {tuple(p.shape)} and GT {tuple(g.shape)} '
                             'differ in size')
    device = preds[0].device
    pred = torch.cat([p.reshape(-1).long().to(device) for p in preds])
    gt = torch.cat([g.reshape(-1).long().to(device) for g in gts])
    sizes = torch.tensor([p.numel() for p in preds], device=device)
    image = torch.repeat_interleave(torch.arange(len(preds), device=device), sizes)
    if ignore_index is not None:
        keep = gt != ignore_index
        pred, gt, image = pred[keep], gt[keep], image[keep]
    for what, ids in (('GT', gt), ('prediction', pred)):
        bad = (ids < 0) | (ids >= num_classes)
        if bad.any():
            raise ValueError(f'batch_confusions: {what} contains values {torch.unique(ids[bad])[:20].tolist()} '
                             f'outside 0..{num_classes - 1} (num_classes={num_classes})')
    c2 = num_classes * num_classes
    counts = torch.bincount(image * c2 + gt * num_classes + pred, minlength=len(preds) * c2)
    return counts.reshape(len(preds), num_classes, num_classes)
