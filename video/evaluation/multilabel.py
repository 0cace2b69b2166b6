"""Multi-label video classification metrics: YouTube-8M GAP@k, Hit@1 and mAP over classes.

Ties are ordered by a stable descending sort (the earlier clip / lower class index first) in GAP; mAP groups
tied scores into one threshold, as scikit-learn's ``average_precision_score`` does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from mmengine.evaluator import BaseMetric
from mmengine.logging import print_log

from oars.evaluation.report import FRACTION_NOTE, format_table
from video.evaluation.fields import class_names, gt_class_ids, gt_label, pred_scores
from video.registry import METRICS


def _check(scores: torch.Tensor, labels: torch.Tensor, where: str) -> None:
    if scores.ndim != 2 or labels.shape != scores.shape:
        raise ValueError(f'{where}: expected scores and multi-hot labels of the same shape [N, C], got '
                         f'{tuple(scores.shape)} and {tuple(labels.shape)}')


def global_average_precision(scores: torch.Tensor, labels: torch.Tensor, top_k: int = 20) -> float:
    """YouTube-8M GAP@k: the average precision of all clips' top-``k`` predictions pooled into one list.

    Each clip contributes its ``k`` highest-scoring (class, score) pairs; the pooled pairs are sorted by score and
    ``GAP = sum_i precision(i) * rel(i) / P``, where ``rel(i)`` says whether pair ``i`` is a true class of its clip
    and ``P`` is the number of true (clip, class) labels in all, counted whether or not they reached a top-k (so a
    true class outside the top-k lowers GAP).

    Args:
        scores: float [N, C]; labels: [N, C] multi-hot (nonzero = positive); top_k: pairs kept per clip.

    Returns:
        GAP in [0, 1]; NaN when there is no positive label.
    """
    _check(scores, labels, 'global_average_precision')
    positives = int((labels > 0).sum())
    if positives == 0:
        return math.nan
    k = min(int(top_k), scores.shape[1])
    top_scores, top_idx = torch.sort(scores, dim=1, descending=True, stable=True)
    top_scores, top_idx = top_scores[:, :k], top_idx[:, :k]  # a stable sort: ties keep the lower class first
    rel = (labels > 0).gather(1, top_idx).reshape(-1)
    order = torch.sort(top_scores.reshape(-1), descending=True, stable=True).indices
    rel = rel[order].double()
    precision = rel.cumsum(0) / torch.arange(1, rel.numel() + 1, dtype=torch.float64)
    return float((precision * rel).sum() / positives)


def hit_at_one(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """Fraction of clips whose highest-scoring class (first index on ties) is one of their true classes.

    Args:
        scores: float [N, C]; labels: [N, C] multi-hot.
    """
    _check(scores, labels, 'hit_at_one')
    if scores.shape[0] == 0:
        return math.nan
    top = scores.argmax(1, keepdim=True)
    return float((labels.gather(1, top) > 0).double().mean())


def class_average_precision(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Average precision of each class over the clips (columns ranked independently).

    ``AP = sum_n (R_n - R_{n-1}) P_n`` over the distinct score thresholds of the class, highest first; tied scores
    form one threshold (scikit-learn's ``average_precision_score``, no interpolation).

    Args:
        scores: float [N, C]; labels: [N, C] multi-hot.

    Returns:
        float64 [C]; NaN for classes without a positive clip.
    """
    _check(scores, labels, 'class_average_precision')
    n = scores.shape[0]
    s, order = torch.sort(scores.double(), dim=0, descending=True, stable=True)
    rel = (labels > 0).gather(0, order).double()
    tp = rel.cumsum(0)  # [N, C]
    positives = tp[-1] if n else torch.zeros(scores.shape[1], dtype=torch.float64)
    # the last position of each run of equal scores closes a threshold
    end = torch.ones_like(s, dtype=torch.bool)
    end[:-1] = s[1:] != s[:-1]
    tp_end = torch.where(end, tp, torch.zeros_like(tp))
    prev = torch.cat([torch.zeros_like(tp[:1]), tp_end.cummax(0).values[:-1]], 0)  # tp at the previous threshold
    precision = tp / torch.arange(1, n + 1, dtype=torch.float64)[:, None]
    ap = (torch.where(end, (tp - prev) * precision, torch.zeros_like(tp))).sum(0)
    return torch.where(positives > 0, ap / positives.clamp(min=1), torch.full_like(ap, math.nan))


@METRICS.register_module()
class MultiLabelMetric(BaseMetric):
    """Multi-label metrics as fractions in [0, 1]: ``multilabel/gap`` (GAP@``gap_top_k``, YouTube-8M),
    ``multilabel/hit_at_one`` and ``multilabel/mAP`` (mean of the per-class APs of the classes that have at
    least one positive clip; classes without one are skipped, named in the log and NaN in the per-class table).

    Reads ``pred_score`` [C] (per-class sigmoid scores) and ``gt_label`` (multi-hot [C]; a single class id [1]
    is taken as a one-hot). Keeps float32 scores and uint8 labels, [N, C] each, until ``evaluate``. After it:
    ``class_ap`` (float64 [C]) and ``per_class_table()``.
    """

    default_prefix: str | None = 'multilabel'

    def __init__(self, gap_top_k: int = 20, collect_device: str = 'cpu', prefix: str | None = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        if isinstance(gap_top_k, bool) or not isinstance(gap_top_k, int) or gap_top_k < 1:
            raise ValueError(f'MultiLabelMetric: gap_top_k must be a positive int, got {gap_top_k!r}')
        self.gap_top_k = gap_top_k
        self.class_ap: torch.Tensor | None = None
        self._table: dict[str, Any] | None = None

    def process(self, data_batch: Any, data_samples: Sequence[Any]) -> None:
        """Keep each clip's (float32 scores [C], uint8 multi-hot [C])."""
        for sample in data_samples:
            score = pred_scores(sample, 'MultiLabelMetric')
            num_classes = score.shape[0]
            hot = np.zeros(num_classes, dtype=np.uint8)
            ids = gt_class_ids(gt_label(sample, 'MultiLabelMetric'), num_classes)
            bad = [i for i in ids if not 0 <= i < num_classes]
            if bad:
                raise ValueError(f'MultiLabelMetric: true class ids {bad} are outside 0..{num_classes - 1} '
                                 f'(the model scores {num_classes} classes)')
            hot[ids] = 1
            self.results.append((score, hot))

    def compute_metrics(self, results: list) -> dict[str, float]:
        if not results:
            raise ValueError('MultiLabelMetric: no results to evaluate (empty dataset?)')
        widths = {r[0].shape[0] for r in results}
        if len(widths) != 1:
            raise ValueError(f'MultiLabelMetric: pred_score lengths differ between clips: {sorted(widths)}')
        scores = torch.from_numpy(np.stack([r[0] for r in results]))
        labels = torch.from_numpy(np.stack([r[1] for r in results]))
        names = class_names(self.dataset_meta, scores.shape[1], 'MultiLabelMetric')
        ap = class_average_precision(scores, labels)
        self.class_ap = ap
        skipped = [names[i] for i in torch.nonzero(torch.isnan(ap)).reshape(-1).tolist()]
        if skipped:
            shown = ', '.join(skipped[:20]) + (' ...' if len(skipped) > 20 else '')
            print_log(f'MultiLabelMetric: mAP skips {len(skipped)} classes without a positive clip: {shown}',
                      logger='current')
        finite = ap[~torch.isnan(ap)]
        metrics = {
            'gap': global_average_precision(scores, labels, self.gap_top_k),
            'hit_at_one': hit_at_one(scores, labels),
            'mAP': float(finite.mean()) if finite.numel() else math.nan,
        }
        header = ['class', 'positives', 'AP']
        rows = [[n, int(p), float(a)] for n, p, a in zip(names, labels.sum(0, dtype=torch.int64).tolist(),
                                                          ap.tolist())]
        self._table = {'header': header, 'rows': rows, 'caption': FRACTION_NOTE}
        print_log(f'per class AP ({FRACTION_NOTE}):\n' + format_table(header, rows), logger='current')
        return metrics

    def per_class_table(self) -> dict[str, list]:
        """``{'header': ['class', 'positives', 'AP'], 'rows': [...]}`` (NaN AP for classes without positives)."""
        if self._table is None:
            raise RuntimeError('MultiLabelMetric.per_class_table() is available after evaluate()/compute_metrics()')
        return self._table
