"""Confusion matrices and the per-class scores derived from them (shared by the tasks).

A metric keeps one small C×C matrix per sample instead of its pixels or boxes; summing the
matrices gives the dataset's, from which IoU, accuracy, Dice, precision and recall follow.
"""

from __future__ import annotations

import torch


def _check_range(values: torch.Tensor, num_classes: int, what: str) -> None:
    if values.numel() == 0:
        return
    lo, hi = torch.aminmax(values)
    if lo < 0 or hi >= num_classes:
        bad = torch.unique(values[(values < 0) | (values >= num_classes)])[:20].tolist()
        raise ValueError(f'{what} contains values {bad} outside 0..{num_classes - 1} (num_classes={num_classes})')


def confusion_matrix(
    pred: torch.Tensor,
    target: torch.Tensor,
    num_classes: int,
    ignore_index: int | None = None,
) -> torch.Tensor:
    """[C, C] int64 counts: row = target class, column = predicted class.

    ``pred`` and ``target`` hold class ids of the same number of elements (any shape); elements whose
    target equals ``ignore_index`` are skipped. Out-of-range ids raise ValueError.
    """
    if pred.numel() != target.numel():
        raise ValueError(f'prediction and target differ in size: {tuple(pred.shape)} vs {tuple(target.shape)}')
    pred = pred.reshape(-1).long()
    target = target.reshape(-1).to(pred.device).long()
    if ignore_index is not None:
        keep = target != ignore_index
        pred, target = pred[keep], target[keep]
    _check_range(target, num_classes, 'target')
    _check_range(pred, num_classes, 'prediction')
    counts = torch.bincount(target * num_classes + pred, minlength=num_classes * num_classes)
    return counts.reshape(num_classes, num_classes)


def per_class_scores(confusion: torch.Tensor, beta: float = 1.0) -> dict[str, torch.Tensor]:
    """Per-class IoU, Acc (recall), Dice, Precision, Recall and F-score as float64 fractions.

    A score whose denominator is 0 is NaN (e.g. IoU of a class neither present nor predicted,
    Acc of a class absent from the targets).
    """
    cm = confusion.double()
    tp = cm.diag()
    gt = cm.sum(1)
    pred = cm.sum(0)
    union = gt + pred - tp
    nan = torch.tensor(float('nan'), dtype=torch.float64)

    def div(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.where(b > 0, a / b.clamp(min=1e-300), nan)

    precision, recall = div(tp, pred), div(tp, gt)
    # F_beta from counts: 0 (not NaN) when the class is present or predicted but never both.
    b2 = beta * beta
    fscore = div((1 + b2) * tp, b2 * gt + pred)
    return {
        'IoU': div(tp, union),
        'Acc': recall,
        'Dice': div(2 * tp, gt + pred),
        'Precision': precision,
        'Recall': recall,
        'Fscore': fscore,
    }


def overall_accuracy(confusion: torch.Tensor) -> float:
    """Fraction of counted elements on the diagonal (NaN when nothing was counted)."""
    total = confusion.sum()
    return float(confusion.diag().sum().double() / total) if total > 0 else float('nan')
