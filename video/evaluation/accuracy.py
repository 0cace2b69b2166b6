"""Single-label action recognition accuracy: top-k, mean class accuracy, per-class accuracy, confusion matrix.

Ties: a clip's rank is the position of its true class in a stable descending sort of its scores, i.e. classes
scoring strictly higher, plus classes scoring the same with a lower index, come first. This is the order
``torch.argmax`` uses (first maximal index), so top-1 agrees with ``pred_label`` and a constant prediction
scores 1/C top-1 on balanced data rather than 0 or 1. MMAction2 ranks with ``np.argsort`` (ties to the higher
index), so on exact ties the two can differ; on real float scores ties do not occur.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from mmengine.evaluator import BaseMetric
from mmengine.logging import print_log

from oars.evaluation.confusion import confusion_matrix, per_class_scores
from oars.evaluation.report import FRACTION_NOTE, format_table
from video.evaluation.fields import class_names, gt_class_ids, gt_label, pred_scores, sample_name
from video.registry import METRICS


def true_class_rank(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """1-based rank of each clip's true class among its scores (ties to the lower class index).

    Args:
        scores: float [N, C] class scores or probabilities.
        labels: int64 [N] true class ids in ``0..C-1``.

    Returns:
        int64 [N]: 1 when the true class is the top prediction, ``C`` when it is the last.
    """
    if scores.ndim != 2 or labels.shape != (scores.shape[0],):
        raise ValueError(f'true_class_rank: expected scores [N, C] and labels [N], got {tuple(scores.shape)} and '
                         f'{tuple(labels.shape)}')
    num_classes = scores.shape[1]
    true = scores.gather(1, labels[:, None])  # [N, 1]
    lower_index = torch.arange(num_classes, device=scores.device)[None, :] < labels[:, None]
    ahead = (scores > true) | ((scores == true) & lower_index)
    return ahead.sum(1) + 1


def top_k_accuracy(scores: torch.Tensor, labels: torch.Tensor, topk: Sequence[int]) -> list[float]:
    """Fraction of clips whose true class is among the ``k`` highest scores, for each ``k`` in ``topk``.

    Args:
        scores: float [N, C]; labels: int64 [N]; topk: positive ints (``k >= C`` gives 1.0).

    Returns:
        one float in [0, 1] per ``k``.
    """
    rank = true_class_rank(scores, labels)
    return [float((rank <= k).double().mean()) for k in topk]


@METRICS.register_module()
class AccMetric(BaseMetric):
    """Top-k accuracy and mean class accuracy of single-label recognition, as fractions in [0, 1].

    Results: ``acc/top{k}`` for each ``k`` in ``topk`` and ``acc/mean_class_accuracy``: the mean over classes of
    each class's top-1 accuracy (recall). Classes with no clip in the evaluated set are left out of that mean
    (their accuracy is NaN in the per-class table, and a log line names them). Each clip keeps its float32
    scores [C] until ``evaluate`` (N x C x 4 bytes). After ``evaluate``: ``confusion`` (int64 [C, C], rows =
    true class, columns = top-1 prediction), ``per_class_accuracy`` (float64 [C]) and ``per_class_table()``.
    Class names come from ``dataset_meta['classes']`` (class ids when absent).
    """

    default_prefix: str | None = 'acc'

    def __init__(self, topk: int | Sequence[int] = (1, 5), collect_device: str = 'cpu',
                 prefix: str | None = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        ks = [topk] if isinstance(topk, int) else list(topk)
        if not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
            raise ValueError(f'AccMetric: topk must be a positive int or a list of them, got {topk!r}')
        self.topk = list(dict.fromkeys(ks))
        self.confusion: torch.Tensor | None = None
        self.per_class_accuracy: torch.Tensor | None = None
        self._table: dict[str, Any] | None = None

    def process(self, data_batch: Any, data_samples: Sequence[Any]) -> None:
        """Keep each clip's (float32 scores [C], true class id)."""
        for sample in data_samples:
            score = pred_scores(sample, 'AccMetric')
            label = gt_label(sample, 'AccMetric')
            ids = gt_class_ids(label, score.shape[0])
            if len(ids) != 1:
                raise ValueError(f'AccMetric: {sample_name(sample)} has {len(ids)} true classes {ids}; AccMetric is '
                                 'for single-label data, use MultiLabelMetric for multi-label data')
            self.results.append((score, ids[0]))

    def compute_metrics(self, results: list) -> dict[str, float]:
        if not results:
            raise ValueError('AccMetric: no results to evaluate (empty dataset?)')
        widths = {r[0].shape[0] for r in results}
        if len(widths) != 1:
            raise ValueError(f'AccMetric: pred_score lengths differ between clips: {sorted(widths)}')
        scores = torch.from_numpy(np.stack([r[0] for r in results]))
        labels = torch.tensor([r[1] for r in results], dtype=torch.int64)
        num_classes = scores.shape[1]
        names = class_names(self.dataset_meta, num_classes, 'AccMetric')
        if num_classes > 0 and (labels.min() < 0 or labels.max() >= num_classes):
            raise ValueError(f'AccMetric: true class ids {labels.unique().tolist()[:20]} are outside '
                             f'0..{num_classes - 1} (the model scores {num_classes} classes)')
        too_big = [k for k in self.topk if k >= num_classes]
        if too_big:
            print_log(f'AccMetric: top-{too_big} with {num_classes} classes is 1.0 by definition', logger='current')

        metrics = {f'top{k}': v for k, v in zip(self.topk, top_k_accuracy(scores, labels, self.topk))}
        pred = scores.argmax(1)
        self.confusion = confusion_matrix(pred, labels, num_classes)
        acc = per_class_scores(self.confusion)['Acc']
        self.per_class_accuracy = acc
        missing = [names[i] for i in torch.nonzero(torch.isnan(acc)).reshape(-1).tolist()]
        if missing:
            shown = ', '.join(missing[:20]) + (' ...' if len(missing) > 20 else '')
            print_log(f'AccMetric: {len(missing)} classes have no clip in this set and are left out of '
                      f'mean_class_accuracy: {shown}', logger='current')
        finite = acc[~torch.isnan(acc)]
        metrics['mean_class_accuracy'] = float(finite.mean()) if finite.numel() else math.nan

        counts = self.confusion.sum(1).tolist()
        header = ['class', 'clips', 'accuracy']
        rows = [[n, int(c), float(a)] for n, c, a in zip(names, counts, acc.tolist())]
        self._table = {'header': header, 'rows': rows, 'caption': FRACTION_NOTE}
        print_log(f'per class accuracy ({FRACTION_NOTE}):\n' + format_table(header, rows), logger='current')
        return metrics

    def per_class_table(self) -> dict[str, list]:
        """``{'header': ['class', 'clips', 'accuracy'], 'rows': [...]}`` (accuracy a fraction, NaN for classes
        without clips) from the last ``evaluate``."""
        if self._table is None:
            raise RuntimeError('AccMetric.per_class_table() is available after evaluate()/compute_metrics()')
        return self._table
