"""PASCAL VOC mAP: AP per class at one or more IoU thresholds, difficult boxes ignored."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from mmengine.evaluator import BaseMetric
from mmengine.logging import print_log

from detection.evaluation.ap import AP_MODES, eval_ap
from detection.evaluation.gt_utils import image_record
from detection.registry import METRICS
from oars.evaluation.report import FRACTION_NOTE, format_table


def ap_name(iou_thr: float) -> str:
    """``0.5 -> 'AP50'``, ``0.75 -> 'AP75'``."""
    return f'AP{int(round(iou_thr * 100)):02d}'


@METRICS.register_module()
class VOCMetric(BaseMetric):
    """Mean AP over classes (VOC matching, see ``ap.py``), values in [0, 1].

    Returns ``AP50`` (one key per IoU threshold) and ``mAP`` (their mean). ``eval_mode``
    ``'11points'`` is VOC2007's AP, ``'area'`` VOC2010+'s. Classes without ground truth get no AP and
    are left out of the means. Ground truth comes from each sample's ``gt_instances`` /
    ``ignored_instances`` (difficult boxes), mapped back to original pixels. After ``evaluate``:
    ``per_class_table()`` (AP as fractions 0–1) and ``curves`` (PR curves at the first threshold).
    """

    default_prefix: str | None = 'pascal_voc'

    def __init__(self, iou_thr: float | Sequence[float] = 0.5, eval_mode: str = '11points',
                 collect_device: str = 'cpu', prefix: str | None = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        thrs = [iou_thr] if isinstance(iou_thr, int | float) else list(iou_thr)
        if not thrs or any(not 0.0 < float(t) <= 1.0 for t in thrs):
            raise ValueError(f'VOCMetric: iou_thr must be a number or list of numbers in (0, 1], got {iou_thr!r}')
        if eval_mode not in AP_MODES:
            raise ValueError(f"VOCMetric: eval_mode must be one of {AP_MODES}, got {eval_mode!r}")
        self.iou_thrs = [float(t) for t in thrs]
        self.eval_mode = eval_mode
        self.curves: list[dict[str, Any]] | None = None
        self._table: dict[str, list] | None = None

    @property
    def class_names(self) -> list[str]:
        classes = (self.dataset_meta or {}).get('classes')
        if not classes:
            raise ValueError("VOCMetric needs dataset_meta['classes'] (the Runner sets it from the dataset's "
                             'metainfo; set metric.dataset_meta yourself when using the metric alone)')
        return list(classes)

    def process(self, data_batch: Any, data_samples: Sequence[Any]) -> None:
        """Keep predictions and original-pixel ground truth of each image."""
        for sample in data_samples:
            rec = image_record(sample, with_gt=True)
            rec.pop('img_path')
            self.results.append(rec)

    def compute_metrics(self, results: list) -> dict[str, float]:
        names = self.class_names
        if not results:
            raise ValueError('VOCMetric: no results to evaluate (empty dataset?)')
        res = eval_ap(results, len(names), self.iou_thrs, self.eval_mode)
        self.curves = res['curves'][0]
        metrics = {ap_name(t): float(m) for t, m in zip(self.iou_thrs, res['map'])}
        metrics['mAP'] = float(np.mean(res['map']))
        header = ['class', '#gt', '#dets', *(ap_name(t) for t in self.iou_thrs)]
        rows = [[name, int(res['num_gts'][c]), int(res['num_dets'][c]),
                 *(_fraction(res['ap'][t, c]) for t in range(len(self.iou_thrs)))] for c, name in enumerate(names)]
        self._table = {'header': header, 'rows': rows, 'caption': FRACTION_NOTE}
        print_log(f'VOC AP ({self.eval_mode}) per class ({FRACTION_NOTE}):\n' + format_table(header, rows),
                  logger='current')
        return metrics

    def per_class_table(self) -> dict[str, list]:
        """``{'header': ['class', '#gt', '#dets', 'AP50', ...], 'rows': [...]}``, AP as fractions
        0–1 (NaN without gt), from the last ``compute_metrics``."""
        if self._table is None:
            raise RuntimeError('VOCMetric.per_class_table() is available after evaluate()/compute_metrics()')
        return self._table


def _fraction(value: float) -> float:
    """A per-class AP as the table keeps it: a fraction 0–1 rounded to 4 decimals (NaN kept)."""
    return float('nan') if np.isnan(value) else round(float(value), 4)
