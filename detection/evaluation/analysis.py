"""Error analysis for the detection report: confusion matrix with background, per-image error counts,
per-class PR curves. Inputs are per-image records (``gt_utils.image_record``) in original pixels.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from detection.evaluation.ap import iou_matrix, match_image, pr_curves


def _above(pred: dict[str, np.ndarray], score_thr: float) -> dict[str, np.ndarray]:
    keep = np.asarray(pred['scores'], np.float64).reshape(-1) >= score_thr
    return {'bboxes': np.asarray(pred['bboxes'], np.float64).reshape(-1, 4)[keep],
            'scores': np.asarray(pred['scores'], np.float64).reshape(-1)[keep],
            'labels': np.asarray(pred['labels'], np.int64).reshape(-1)[keep]}


def image_confusion(rec: dict[str, Any], num_classes: int, score_thr: float = 0.3,
                    iou_thr: float = 0.5) -> np.ndarray:
    """One image's ``[C + 1, C + 1]`` counts (see :func:`confusion_matrix`, the sum of these over the images);
    kept per image for the report's ``confusion_cells.json`` (which images fall in each cell)."""
    cm = np.zeros((num_classes + 1, num_classes + 1), dtype=np.int64)
    bg = num_classes
    gt, pred = rec['gt'], _above(rec['pred'], score_thr)
    gl = np.asarray(gt['labels'], np.int64)
    pl = pred['labels']
    over = iou_matrix(pred['bboxes'], gt['bboxes']) >= iou_thr  # [K, N]
    on_ignored = (iou_matrix(pred['bboxes'], gt['ignore_bboxes']) >= iou_thr).any(1)
    rows, cols = np.nonzero(over)
    np.add.at(cm, (gl[cols], pl[rows]), 1)
    np.add.at(cm, (bg, pl[~over.any(1) & ~on_ignored]), 1)
    found = (over & (pl[:, None] == gl[None, :])).any(0)
    np.add.at(cm, (gl[~found], bg), 1)
    return cm


def confusion_matrix(records: Sequence[dict[str, Any]], num_classes: int, score_thr: float = 0.3,
                     iou_thr: float = 0.5) -> np.ndarray:
    """``[C + 1, C + 1]`` counts; rows = ground-truth class + background, columns = predicted class +
    background (the last row/column), for detections with score >= ``score_thr``.

    As mmdet's ``tools/analysis_tools/confusion_matrix.py``: each (detection, gt box) pair with
    IoU >= ``iou_thr`` adds one to ``[gt class, predicted class]``; a detection overlapping no gt box adds
    to ``[background, predicted class]`` (a false positive on background); a gt box that no detection
    of its own class overlaps adds to ``[gt class, background]`` (missed). Ignored gt boxes are never
    counted as missed, and a detection that only overlaps ignored boxes is not a background error.
    """
    cm = np.zeros((num_classes + 1, num_classes + 1), dtype=np.int64)
    for rec in records:
        cm += image_confusion(rec, num_classes, score_thr, iou_thr)
    return cm


def image_errors(records: Sequence[dict[str, Any]], score_thr: float = 0.3,
                 iou_thr: float = 0.5) -> list[dict[str, Any]]:
    """Per image, with detections of score >= ``score_thr`` matched by the VOC rule at ``iou_thr``:
    ``{'missed': int, 'false_positives': int, 'missed_mask' bool [N gt], 'fp_mask' bool [K preds]}``
    (masks index the record's full ``gt['bboxes']`` and ``pred['bboxes']``)."""
    out = []
    for rec in records:
        scores = np.asarray(rec['pred']['scores'], np.float64).reshape(-1)
        keep = scores >= score_thr
        m = match_image(_above(rec['pred'], score_thr), rec['gt'], (iou_thr,))
        fp_mask = np.zeros(len(scores), dtype=bool)
        fp_mask[keep] = m['fp'][0]
        missed_mask = ~m['gt_hit'][0]
        out.append({'missed': int(missed_mask.sum()), 'false_positives': int(fp_mask.sum()),
                    'missed_mask': missed_mask, 'fp_mask': fp_mask})
    return out


def worst_images(errors: Sequence[dict[str, Any]], num: int) -> list[int]:
    """Indices of up to ``num`` images with the most missed + false boxes (ties: earlier image first);
    images without any error are left out."""
    totals = np.array([e['missed'] + e['false_positives'] for e in errors], dtype=np.int64)
    order = np.argsort(-totals, kind='stable')
    return [int(i) for i in order[:num] if totals[i] > 0]


def class_pr_curves(records: Sequence[dict[str, Any]], num_classes: int,
                    iou_thr: float = 0.5) -> list[dict[str, Any]]:
    """Per class ``{'recall', 'precision', 'scores', 'num_gt', 'num_dets'}`` at one IoU threshold
    (all detections, as for AP)."""
    return pr_curves(records, num_classes, (iou_thr,))[0]
