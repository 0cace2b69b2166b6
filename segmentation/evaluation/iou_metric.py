"""Mean IoU (and Dice / F-score / Cohen's kappa) over a dataset, from one running confusion matrix per rank.

Why a running sum: a C×C int64 matrix per image is 180 kB for ADE-150, ≈360 MB per rank over ADE's 2000
validation images; the sum is all the metric needs. What the per-image list gave for free in distributed runs,
dropping the samples the sampler repeats to even out the ranks (mmengine's ``collect_results(..., size)``), is
kept: the repeated samples are each rank's last one (``DefaultSampler`` pads the index list at its end and deals
it out round-robin), so each rank holds its last image's matrix apart and adds it at ``evaluate`` unless its
global position is past the dataset's size.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from typing import Any

import torch
from mmengine.dist import get_dist_info
from mmengine.evaluator import BaseMetric
from mmengine.logging import print_log

from oars.evaluation.confusion import confusion_matrix, overall_accuracy, per_class_scores
from oars.evaluation.report import FRACTION_NOTE, format_table
from segmentation.evaluation.agreement import cohen_kappa
from segmentation.registry import METRICS

# summary metric -> per-class scores it reports (each averaged into 'm<Score>'); Kappa is one number, no column
_METRIC_SCORES = {'mIoU': ('IoU', 'Acc'), 'mDice': ('Dice', 'Acc'), 'mFscore': ('Fscore', 'Precision', 'Recall'),
                  'Kappa': ()}


def _pixel_data(sample: Any, field: str) -> torch.Tensor:
    """``sample[field]['data']`` for the dicts the Evaluator passes (or attributes of a SegDataSample)."""
    try:
        if isinstance(sample, dict):
            return sample[field]['data']
        return getattr(sample, field).data
    except (KeyError, AttributeError) as e:
        raise KeyError(f"IoUMetric: a data sample has no '{field}' with 'data'; the model's predict mode must set "
                       f'pred_sem_seg and the test pipeline must load annotations (LoadSegAnnotations)') from e


@METRICS.register_module()
class IoUMetric(BaseMetric):
    """Semantic segmentation metrics: ``aAcc``, and per ``iou_metrics`` entry ``mIoU`` (+ ``mAcc``),
    ``mDice`` (+ ``mAcc``), ``mFscore`` (+ ``mPrecision``, ``mRecall``), ``Kappa`` (Cohen's kappa of the summed
    matrix), all fractions 0–1 rounded to 4 decimals, as every metric of the suite (kappa too, so one table has
    one unit; it can be negative).
    ``iou_metrics: [mIoU, mDice, mFscore, Kappa]`` reports them all; the per-class table gets one column per score.

    ``process`` adds each image's C×C confusion matrix to one running sum (pixels whose GT is ``ignore_index``
    are skipped), so memory does not grow with the number of images. Class names come from
    ``dataset_meta['classes']``. Classes with no GT and no prediction are NaN and left out of the means;
    ``nan_to_num`` replaces NaN per-class scores (which then count in the means). After ``evaluate`` the
    per-class table is in ``per_class_table()`` and the summed matrix in ``confusion``.
    """

    default_prefix: str | None = None

    def __init__(
        self,
        iou_metrics: Sequence[str] = ('mIoU',),
        ignore_index: int = 255,
        nan_to_num: float | None = None,
        beta: float = 1.0,
        collect_device: str = 'cpu',
        prefix: str | None = None,
    ) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        if isinstance(iou_metrics, str):
            iou_metrics = [iou_metrics]
        for m in iou_metrics:
            if m not in _METRIC_SCORES:
                close = difflib.get_close_matches(str(m), list(_METRIC_SCORES), n=1)
                hint = f' (did you mean {close[0]!r}?)' if close else ''
                raise KeyError(f'IoUMetric: unknown metric {m!r}{hint}; choose from {list(_METRIC_SCORES)}')
        self.iou_metrics = list(iou_metrics)
        self.ignore_index = ignore_index
        self.nan_to_num = nan_to_num
        self.beta = beta
        self.confusion: torch.Tensor | None = None
        self._table: dict[str, list] | None = None
        self._last: torch.Tensor | None = None  # the latest image's matrix, not yet in results[0]
        self._count = 0  # images processed on this rank since the last evaluate

    @property
    def class_names(self) -> list[str]:
        classes = (self.dataset_meta or {}).get('classes')
        if not classes:
            raise ValueError("IoUMetric needs dataset_meta['classes'] (the Runner sets it from the dataset's "
                             'metainfo; set metric.dataset_meta yourself when using the metric alone)')
        return list(classes)

    def process(self, data_batch: Any, data_samples: Sequence[Any]) -> None:
        """Add each sample's confusion matrix to the running sum (prediction and GT both [1, H, W])."""
        num_classes = len(self.class_names)
        for sample in data_samples:
            pred = _pixel_data(sample, 'pred_sem_seg')
            gt = _pixel_data(sample, 'gt_sem_seg')
            if pred.shape[-2:] != gt.shape[-2:]:
                path = sample.get('img_path', '?') if isinstance(sample, dict) else '?'
                raise ValueError(f'IoUMetric: prediction {tuple(pred.shape)} and GT {tuple(gt.shape)} differ in '
                                 f'size for {path}; predictions must be at the original image size')
            self._add(confusion_matrix(pred, gt, num_classes, self.ignore_index).cpu())

    def _add(self, cm: torch.Tensor) -> None:
        if self._last is not None:
            if self.results:
                self.results[0] += self._last
            else:
                self.results.append(self._last.clone())
        self._last = cm
        self._count += 1

    def rank_confusion(self, size: int) -> torch.Tensor:
        """This rank's summed [C, C] matrix over the images of a ``size``-image dataset: in a distributed run
        the last image is left out when it is a repeat the sampler added (its global position
        ``(count - 1) * world_size + rank`` is ``>= size``)."""
        rank, world_size = get_dist_info()
        n = len(self.class_names)
        total = self.results[0].clone() if self.results else torch.zeros(n, n, dtype=torch.int64)
        if self._last is not None and not (world_size > 1 and (self._count - 1) * world_size + rank >= size):
            total += self._last
        return total

    def evaluate(self, size: int) -> dict:
        """mmengine's ``evaluate`` over one matrix per rank (see the module docstring); resets the sum."""
        try:
            world_size = get_dist_info()[1]
            # every rank sends one matrix (collect_results zips the ranks' lists); alone, nothing processed
            # stays an empty list, which compute_metrics reports
            self.results[:] = [self.rank_confusion(size)] if self._count or world_size > 1 else []
            return super().evaluate(world_size)
        finally:
            self.results.clear()
            self._last, self._count = None, 0

    def _scores(self, total: torch.Tensor) -> dict[str, torch.Tensor]:
        scores = per_class_scores(total, beta=self.beta)
        if self.nan_to_num is not None:
            scores = {k: torch.nan_to_num(v, nan=float(self.nan_to_num)) for k, v in scores.items()}
        return scores

    def compute_metrics(self, results: list) -> dict[str, float]:
        """Sum the matrices; return summary metrics as fractions 0–1 and log the per-class table."""
        names = self.class_names
        if not results:
            raise ValueError('IoUMetric: no results to evaluate (empty dataset?)')
        total = torch.stack([torch.as_tensor(r) for r in results]).sum(0)
        if total.shape != (len(names), len(names)):
            raise ValueError(f'IoUMetric: confusion matrices are {tuple(total.shape)} but there are {len(names)} '
                             'classes in dataset_meta')
        self.confusion = total
        scores = self._scores(total)
        keys = [k for m in self.iou_metrics for k in _METRIC_SCORES[m]]
        keys = list(dict.fromkeys(keys))  # unique, in order
        metrics = {'aAcc': _fraction(overall_accuracy(total))}
        for k in keys:
            metrics[f'm{k}'] = _fraction(_nanmean(scores[k]))
        if 'Kappa' in self.iou_metrics:
            metrics['Kappa'] = _fraction(cohen_kappa(total))
        header = ['class', *keys]
        rows = [[name, *(_fraction(float(scores[k][i])) for k in keys)] for i, name in enumerate(names)]
        self._table = {'header': header, 'rows': rows, 'caption': FRACTION_NOTE}
        print_log(f'per class results ({FRACTION_NOTE}):\n' + format_table(header, rows), logger='current')
        return metrics

    def per_class_table(self) -> dict[str, list]:
        """``{'header': ['class', 'IoU', 'Acc', ...], 'rows': [[name, iou, acc, ...], ...]}`` as fractions 0–1
        (NaN for undefined scores) from the last ``compute_metrics``."""
        if self._table is None:
            raise RuntimeError('IoUMetric.per_class_table() is available after evaluate()/compute_metrics()')
        return self._table


def _nanmean(values: torch.Tensor) -> float:
    finite = values[~torch.isnan(values)]
    return float(finite.mean()) if finite.numel() else float('nan')


def _fraction(value: float) -> float:
    """A score as reported: a fraction 0–1 rounded to 4 decimals (NaN kept)."""
    return value if math.isnan(value) else round(value, 4)
