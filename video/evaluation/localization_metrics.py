"""Temporal action localisation metric (BMN and the like): ActivityNet proposal AR@AN / AUC and detection mAP.

What a data sample must carry (the Evaluator hands ``to_dict()`` dicts; the samples themselves work too):

- from the dataset (``PackLocalizationInputs``): ``video_name``, ``gt_segments`` (float [N, 2], seconds, the
  annotations as written, as the official code scores them) and ``gt_labels`` (int [N]); without
  ``gt_segments``, ``gt_bbox`` (float [N, 2] in [0, 1], clipped to the video) times ``feature_second`` (or
  ``duration_second``);
- from the model's predict mode: ``proposals``: float [K, 3] (start_s, end_s, score) in seconds (a tensor, an
  array, or MMAction2's ``[{'segment': [s, e], 'score': x}, ...]``) and, for ``mAP``, ``segments``: float
  [K, 4] (start_s, end_s, score, class id).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from mmengine.evaluator import BaseMetric
from mmengine.logging import print_log

from video.evaluation.activitynet_eval import (
    NUM_GRID_POINTS,
    TIED_SCORES_WARNING,
    TIOU_THRESHOLDS,
    area_under_ar_an,
    average_recall_vs_num_proposals,
    detection_average_precision,
    tied_score_fraction,
)
from video.evaluation.activitynet_submission import write_submission
from video.registry import METRICS

LOCALIZATION_METRICS = ('AR@AN', 'mAP')


def _get(sample: Any, key: str) -> Any:
    if isinstance(sample, dict):
        return sample.get(key)
    return getattr(sample, key, None) if key in sample else None


def _array(value: Any, width: int, what: str, name: str) -> np.ndarray:
    """``value`` as float64 [K, width] (a tensor, an array, nested lists, or a list of segment dicts)."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().double().numpy()
    elif isinstance(value, (list, tuple)) and value and isinstance(value[0], dict):
        try:
            value = [[*d['segment'], d['score'], *([d['label']] if width == 4 else [])] for d in value]
        except (KeyError, TypeError) as err:
            raise ValueError(f"LocalizationMetric: {name}: {what} as a list of dicts needs 'segment' and 'score'"
                             f"{' and label' if width == 4 else ''} in each ({err})") from None
    arr = np.asarray(value, dtype=np.float64)
    if arr.size == 0:
        return np.zeros((0, width))
    if arr.ndim != 2 or arr.shape[1] != width or not np.isfinite(arr).all():
        raise ValueError(f'LocalizationMetric: {name}: {what} must be finite floats [K, {width}], got shape '
                         f'{tuple(arr.shape)}')
    return arr


def _gt(sample: Any, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(float64 [N, 2] seconds, int64 [N] labels) of one sample."""
    segments = _get(sample, 'gt_segments')
    if segments is None:
        bbox = _get(sample, 'gt_bbox')
        seconds = _get(sample, 'feature_second') or _get(sample, 'duration_second')
        if bbox is None or seconds is None:
            raise KeyError(f"LocalizationMetric: {name} has no 'gt_segments' (nor 'gt_bbox' with 'duration_second'); "
                           'the pipeline must end with GenerateLocalizationLabels and PackLocalizationInputs')
        segments = _array(bbox, 2, 'gt_bbox', name) * float(seconds)
    segments = _array(segments, 2, 'gt_segments', name)
    labels = _get(sample, 'gt_labels')
    labels = np.zeros(len(segments), np.int64) if labels is None else np.asarray(
        labels.cpu() if isinstance(labels, torch.Tensor) else labels, dtype=np.int64).reshape(-1)
    if labels.shape[0] != segments.shape[0]:
        raise ValueError(f'LocalizationMetric: {name}: {segments.shape[0]} gt segments but {labels.shape[0]} labels')
    return segments, labels


def warn_tied_scores(fraction: float, what: str, group: str, measure: str) -> None:
    """Warn when more than :data:`TIED_SCORES_WARNING` of the scores are tied (see ``tied_score_fraction``).

    Args:
        fraction: the tied share in [0, 1].
        what: ``'proposals'`` or ``'detections'``.
        group: what one sort ranks (``'the same video'``, ``'the same class'``).
        measure: the numbers it affects and the official script.
    """
    if fraction > TIED_SCORES_WARNING:
        print_log(f'LocalizationMetric: {fraction:.0%} of the {what} share their score with another of {group}; '
                  'ties are ranked here in input order, while the official '
                  f'{measure} ranks them with numpy\'s unstable sort, in an order that depends on the numpy version '
                  'and the CPU: on such scores its numbers are not reproducible and can differ from these '
                  '(docs/video.md, "Tied scores")', logger='current', level=logging.WARNING)


@METRICS.register_module()
class LocalizationMetric(BaseMetric):
    """ActivityNet temporal localisation metrics (see :mod:`video.evaluation.activitynet_eval`).

    Args:
        metrics: ``'AR@AN'`` (proposals: ``AR@k`` for each ``k`` of ``ar_at`` and ``AUC``), ``'mAP'`` (detections:
            ``mAP@t`` for each ``t`` of ``map_at`` and ``mAP``, the mean over ``tiou_thresholds``), or both.
        tiou_thresholds: the tIoU thresholds (default 0.5:0.05:0.95).
        max_avg_proposals: the largest AN (100 for ActivityNet); the curve has 100 points up to it.
        ar_at: the AN values reported (each must be a grid point ``j * max_avg_proposals / 100``).
        map_at: the thresholds whose mAP is reported (each must be one of ``tiou_thresholds``).
        proposal_file / detection_file: where to also write the proposals / detections as ActivityNet submission
            JSON (what the official ``eval_proposal.py`` / ``eval_detection.py`` read); None writes nothing.
        collect_device, prefix: as mmengine's ``BaseMetric`` (default prefix ``localization``).

    Results are fractions in [0, 1], ``AUC`` too (the official code prints it in percent). After ``evaluate``:
    ``recall`` (float64 [T, 100]), ``avg_recall`` and ``proposals_per_video`` (float64 [100]), ``ap``
    (float64 [T, C], NaN for classes without ground truth).
    """

    default_prefix: str | None = 'localization'

    def __init__(self, metrics: str | Sequence[str] = ('AR@AN',),
                 tiou_thresholds: Sequence[float] | None = None, max_avg_proposals: int = 100,
                 ar_at: Sequence[int] = (1, 5, 10, 100), map_at: Sequence[float] = (0.5, 0.75, 0.95),
                 proposal_file: str | None = None, detection_file: str | None = None,
                 collect_device: str = 'cpu', prefix: str | None = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        self.proposal_file = proposal_file
        self.detection_file = detection_file
        names = [metrics] if isinstance(metrics, str) else list(metrics)
        bad = [m for m in names if m not in LOCALIZATION_METRICS]
        if not names or bad:
            raise ValueError(f'LocalizationMetric: metrics must be some of {list(LOCALIZATION_METRICS)}, '
                             f'got {metrics!r}')
        self.metrics = names
        self.tiou_thresholds = TIOU_THRESHOLDS if tiou_thresholds is None else np.asarray(tiou_thresholds, float)
        if self.tiou_thresholds.ndim != 1 or not self.tiou_thresholds.size or \
                ((self.tiou_thresholds <= 0) | (self.tiou_thresholds > 1)).any():
            raise ValueError(f'LocalizationMetric: tiou_thresholds must be values in (0, 1], got {tiou_thresholds!r}')
        if max_avg_proposals <= 0:
            raise ValueError(f'LocalizationMetric: max_avg_proposals must be positive, got {max_avg_proposals!r}')
        self.max_avg_proposals = float(max_avg_proposals)
        grid = np.arange(1, NUM_GRID_POINTS + 1) * self.max_avg_proposals / NUM_GRID_POINTS
        self._ar_index = {}
        for k in ar_at:
            hit = np.nonzero(np.isclose(grid, k))[0]
            if not hit.size:
                raise ValueError(f'LocalizationMetric: AR@{k} is not on the AR-AN grid (multiples of '
                                 f'{self.max_avg_proposals / NUM_GRID_POINTS:g} up to {self.max_avg_proposals:g})')
            self._ar_index[k] = int(hit[0])
        self._map_index = {}
        for t in map_at:
            hit = np.nonzero(np.isclose(self.tiou_thresholds, t))[0]
            if not hit.size:
                raise ValueError(f'LocalizationMetric: mAP@{t} needs {t} among tiou_thresholds '
                                 f'{self.tiou_thresholds.tolist()}')
            self._map_index[t] = int(hit[0])
        self.recall = self.avg_recall = self.proposals_per_video = self.ap = None

    def process(self, data_batch: Any, data_samples: Sequence[Any]) -> None:
        """Keep each video's (name, gt segments [N, 2], gt labels [N], proposals [K, 3], segments [K', 4] or None)."""
        for sample in data_samples:
            name = str(_get(sample, 'video_name') or '?')
            segments, labels = _gt(sample, name)
            proposals = _get(sample, 'proposals')
            if proposals is None and 'AR@AN' in self.metrics:
                raise KeyError(f"LocalizationMetric: {name} has no 'proposals' (float [K, 3]: start_s, end_s, score); "
                               "the localizer's predict mode must set them")
            dets = _get(sample, 'segments')
            if dets is None and 'mAP' in self.metrics:
                raise KeyError(f"LocalizationMetric: {name} has no 'segments' (float [K, 4]: start_s, end_s, score, "
                               "class id) for mAP; drop 'mAP' from metrics for a proposal-only model")
            self.results.append((name, segments, labels,
                                 None if proposals is None else _array(proposals, 3, 'proposals', name),
                                 None if dets is None else _array(dets, 4, 'segments', name)))

    def compute_metrics(self, results: list) -> dict[str, float]:
        if not results:
            raise ValueError('LocalizationMetric: no results to evaluate (empty dataset?)')
        out: dict[str, float] = {}
        gts = [r[1] for r in results]
        classes = (self.dataset_meta or {}).get('classes')
        if self.proposal_file:
            write_submission(self.proposal_file, [r[0] for r in results], [r[3] for r in results])
        if self.detection_file and any(r[4] is not None for r in results):
            top = max([int(np.rint(r[4][:, 3]).max()) for r in results if r[4] is not None and len(r[4])] + [0])
            names = classes if classes and top < len(classes) else [str(i) for i in range(top + 1)]
            write_submission(self.detection_file, [r[0] for r in results], [r[4] for r in results], names)
        if 'AR@AN' in self.metrics:
            warn_tied_scores(tied_score_fraction([r[3][:, 2] for r in results]), 'proposals', 'the same video',
                             'eval_proposal.py (AR@AN, AUC)')
            self.recall, self.avg_recall, self.proposals_per_video = average_recall_vs_num_proposals(
                gts, [r[3] for r in results], self.max_avg_proposals, self.tiou_thresholds)
            out.update({f'AR@{k}': float(self.avg_recall[i]) for k, i in self._ar_index.items()})
            out['AUC'] = area_under_ar_an(self.avg_recall, self.proposals_per_video)
        if 'mAP' in self.metrics:
            top = max([int(lb.max()) for lb in (r[2] for r in results) if lb.size] + [0]) + 1
            num_classes = len(classes) if classes else top
            if top > num_classes:
                raise ValueError(f'LocalizationMetric: gt label {top - 1} is outside the {num_classes} classes')
            dets = np.concatenate([r[4] for r in results]).reshape(-1, 4)
            classes_of = np.rint(dets[:, 3])
            warn_tied_scores(tied_score_fraction([dets[classes_of == c, 2] for c in np.unique(classes_of)]),
                             'detections', 'the same class', 'eval_detection.py (mAP)')
            self.ap = detection_average_precision(gts, [r[2] for r in results], [r[4] for r in results],
                                                  num_classes, self.tiou_thresholds)
            with np.errstate(invalid='ignore'):
                per_threshold = np.nanmean(self.ap, axis=1) if not np.isnan(self.ap).all() else \
                    np.zeros(self.tiou_thresholds.size)
            out.update({f'mAP@{t:g}': float(per_threshold[i]) for t, i in self._map_index.items()})
            out['mAP'] = float(per_threshold.mean())
        print_log('localization: ' + ', '.join(f'{k} {v:.4f}' for k, v in out.items())
                  + f' ({len(results)} videos)', logger='current')
        return out
