"""VOC-style matching of detections to ground truth, precision/recall curves and average precision.

Matching (the PASCAL VOC rule, as the devkit and mmdet's ``tpfp_default`` apply it): within an image
and class, detections are taken in descending score order; each one is assigned to the ground-truth
box it overlaps most. If that IoU is below the threshold the detection is a false positive. If the box
is *ignored* (VOC ``difficult``, COCO crowd) the detection is neither true nor false positive. Else it
is a true positive if it is the first detection assigned to that box, a false positive (duplicate)
otherwise. Because the assigned box does not depend on earlier matches, "first detection assigned to
the box" is a ``np.unique(..., return_index=True)`` over the score-sorted assignments: no loop over
detections.

Records are the per-image dicts of ``gt_utils.image_record``: ``{'pred': {'bboxes', 'scores',
'labels'}, 'gt': {'bboxes', 'labels', 'ignore_bboxes', 'ignore_labels'}}``, boxes xyxy in original pixels.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from detection.box_ops import iou_matrix

AP_MODES = ('area', '11points')


def match_image(pred: dict[str, np.ndarray], gt: dict[str, np.ndarray],
                iou_thrs: Sequence[float] = (0.5,)) -> dict[str, np.ndarray]:
    """Match one image's detections to its ground truth (VOC rule, per class), for each IoU threshold.

    Returns, in the order of ``pred``'s boxes, ``tp`` and ``fp`` (bool [T, K]; a detection matched to
    an ignored box is neither) and ``gt_hit`` (bool [T, N]: non-ignored gt boxes found by a true positive).
    """
    thrs = np.asarray(iou_thrs, dtype=np.float64).reshape(-1)
    scores = np.asarray(pred['scores'], dtype=np.float64).reshape(-1)
    k, n = len(scores), len(gt['labels'])
    tp = np.zeros((len(thrs), k), dtype=bool)
    fp = np.zeros((len(thrs), k), dtype=bool)
    gt_hit = np.zeros((len(thrs), n), dtype=bool)
    if k == 0:
        return {'tp': tp, 'fp': fp, 'gt_hit': gt_hit}
    boxes = np.concatenate([np.asarray(gt['bboxes'], np.float64).reshape(-1, 4),
                            np.asarray(gt['ignore_bboxes'], np.float64).reshape(-1, 4)])
    labels = np.concatenate([np.asarray(gt['labels'], np.int64), np.asarray(gt['ignore_labels'], np.int64)])
    ignored = np.arange(len(labels)) >= n
    if len(labels) == 0:
        fp[:] = True
        return {'tp': tp, 'fp': fp, 'gt_hit': gt_hit}

    order = np.argsort(-scores, kind='stable')
    pred_labels = np.asarray(pred['labels'], dtype=np.int64)[order]
    iou = iou_matrix(np.asarray(pred['bboxes'])[order], boxes)
    iou[pred_labels[:, None] != labels[None, :]] = -1.0  # only same-class boxes can match
    best = iou.argmax(1)
    best_iou = iou[np.arange(k), best]
    for t, thr in enumerate(thrs):
        hit = best_iou >= thr
        cand = np.flatnonzero(hit & ~ignored[best])
        _, first = np.unique(best[cand], return_index=True)  # first (highest-score) claim of each box
        tp_sorted = np.zeros(k, dtype=bool)
        tp_sorted[cand[first]] = True
        fp_sorted = ~hit
        fp_sorted[cand] = True
        fp_sorted[cand[first]] = False
        tp[t, order] = tp_sorted
        fp[t, order] = fp_sorted
        gt_hit[t, best[cand[first]]] = True
    return {'tp': tp, 'fp': fp, 'gt_hit': gt_hit}


def pr_curves(records: Sequence[dict[str, Any]], num_classes: int,
              iou_thrs: Sequence[float] = (0.5,)) -> list[list[dict[str, Any]]]:
    """Per IoU threshold, per class: ``{'recall', 'precision', 'scores'}`` (arrays over the class's
    detections in descending score order, ignored matches left out), ``num_gt`` and ``num_dets``.

    Recall is NaN-free only where the class has ground truth (``num_gt > 0``); otherwise it is all zeros.
    """
    thrs = np.asarray(iou_thrs, dtype=np.float64).reshape(-1)
    scores, labels, tps, fps = [], [], [], []
    num_gt = np.zeros(num_classes, dtype=np.int64)
    for rec in records:
        gt = rec.get('gt')
        if gt is None:
            raise ValueError(f"image {rec.get('img_id')} has no ground truth; AP needs gt for every image")
        pred = rec['pred']
        m = match_image(pred, gt, thrs)
        scores.append(np.asarray(pred['scores'], np.float64).reshape(-1))
        labels.append(np.asarray(pred['labels'], np.int64).reshape(-1))
        tps.append(m['tp'])
        fps.append(m['fp'])
        gl = np.asarray(gt['labels'], np.int64)
        if len(gl) and (gl.min() < 0 or gl.max() >= num_classes):
            raise ValueError(f"image {rec.get('img_id')}: gt labels {np.unique(gl).tolist()} outside "
                             f'[0, {num_classes}) for {num_classes} classes')
        num_gt += np.bincount(gl, minlength=num_classes)[:num_classes]
    all_scores = np.concatenate(scores) if scores else np.zeros(0)
    all_labels = np.concatenate(labels) if labels else np.zeros(0, np.int64)
    all_tp = np.concatenate(tps, axis=1) if tps else np.zeros((len(thrs), 0), bool)
    all_fp = np.concatenate(fps, axis=1) if fps else np.zeros((len(thrs), 0), bool)

    out: list[list[dict[str, Any]]] = [[] for _ in thrs]
    for c in range(num_classes):
        idx = np.flatnonzero(all_labels == c)
        idx = idx[np.argsort(-all_scores[idx], kind='stable')]
        for t in range(len(thrs)):
            tp, fp = all_tp[t, idx], all_fp[t, idx]
            keep = tp | fp  # detections on ignored boxes count for nothing
            ctp = np.cumsum(tp[keep])
            cfp = np.cumsum(fp[keep])
            recall = ctp / num_gt[c] if num_gt[c] > 0 else np.zeros(len(ctp))
            precision = ctp / np.maximum(ctp + cfp, np.finfo(np.float64).eps)
            out[t].append({'recall': recall, 'precision': precision, 'scores': all_scores[idx][keep],
                           'num_gt': int(num_gt[c]), 'num_dets': len(idx)})
    return out


def average_precision(recall: np.ndarray, precision: np.ndarray, mode: str = 'area') -> float:
    """AP from a PR curve (recall non-decreasing). ``'area'``: area under the monotone precision
    envelope (VOC2010+); ``'11points'``: mean of the envelope at recall 0, 0.1, ..., 1 (VOC2007)."""
    recall = np.asarray(recall, dtype=np.float64).reshape(-1)
    precision = np.asarray(precision, dtype=np.float64).reshape(-1)
    if mode not in AP_MODES:
        raise ValueError(f'average_precision: mode must be one of {AP_MODES}, got {mode!r}')
    if recall.size == 0:
        return 0.0
    if mode == 'area':
        mrec = np.concatenate([[0.0], recall, [1.0]])
        mpre = np.concatenate([[0.0], precision, [0.0]])
        mpre = np.maximum.accumulate(mpre[::-1])[::-1]
        steps = np.flatnonzero(mrec[1:] != mrec[:-1])
        return float(np.sum((mrec[steps + 1] - mrec[steps]) * mpre[steps + 1]))
    envelope = np.maximum.accumulate(precision[::-1])[::-1]  # best precision at recall >= r_i
    first = np.searchsorted(recall, np.linspace(0.0, 1.0, 11), side='left')
    values = np.where(first < len(recall), envelope[np.minimum(first, len(recall) - 1)], 0.0)
    return float(values.mean())


def eval_ap(records: Sequence[dict[str, Any]], num_classes: int, iou_thrs: Sequence[float] = (0.5,),
            mode: str = 'area') -> dict[str, Any]:
    """AP per IoU threshold and class (NaN for classes without ground truth), their class means, and
    the curves: ``{'ap' [T, C], 'map' [T], 'num_gts' [C], 'num_dets' [C], 'curves' (pr_curves output)}``."""
    if mode not in AP_MODES:
        raise ValueError(f'eval_ap: mode must be one of {AP_MODES}, got {mode!r}')
    curves = pr_curves(records, num_classes, iou_thrs)
    ap = np.array([[average_precision(c['recall'], c['precision'], mode) if c['num_gt'] > 0 else np.nan
                    for c in per_thr] for per_thr in curves], dtype=np.float64).reshape(len(curves), num_classes)
    has_gt = ~np.isnan(ap)
    mean = np.array([row[ok].mean() if ok.any() else np.nan for row, ok in zip(ap, has_gt)])
    first = curves[0] if curves else []
    return {'ap': ap, 'map': mean, 'num_gts': np.array([c['num_gt'] for c in first], dtype=np.int64),
            'num_dets': np.array([c['num_dets'] for c in first], dtype=np.int64), 'curves': curves}
