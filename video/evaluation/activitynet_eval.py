"""ActivityNet temporal localisation measures in plain numpy: temporal IoU, proposal AR@AN and its AUC, and
detection AP per class at several tIoU thresholds.

They follow the official ``Evaluation/eval_proposal.py`` and ``eval_detection.py`` of activitynet/ActivityNet
(the numbers MMAction2 and the BMN paper report), written again with arrays instead of data frames:

- AR@AN: each video's proposals are sorted by score and cut to ``int(K_v * ratio)`` with
  ``ratio = max_avg_proposals * V / (all proposals)`` (V: the videos with ground truth); at each of the 100 grid
  points ``p = 0.01 .. 1`` a video keeps its ``int(K'_v * p * max_avg_proposals * V / sum K')`` best proposals, a
  ground-truth segment is recalled at threshold ``t`` when one kept proposal reaches tIoU >= t, and the recall
  (pooled over videos) is averaged over the thresholds. The grid is then "proposals per video" =
  ``p * max_avg_proposals`` (1..100 for the usual 100), and the AUC is
  ``trapezoid(avg_recall, proposals_per_video) / proposals_per_video[-1]`` from AN = 1, as the official code, but as
  a fraction 0–1 like every metric of the suite (the official code prints 100 times it, in percent). The
  products are evaluated in the official order, so its float truncations (e.g. the count at a grid point that
  lands just under an integer) are reproduced.
- Detection AP: per class, predictions sorted by score (descending, stable: ties keep their input order; the
  official code's reversed quicksort leaves ties unordered) are matched greedily, at each threshold separately,
  to the not yet matched ground truth of their video with the highest tIoU among those reaching the threshold;
  of ground truths with the same tIoU the one listed last is taken, as the official ``tiou_arr.argsort()[::-1]``
  does where numpy's sort is stable on small arrays (its insertion sort; measured with numpy 2.4.6's AVX-512 sort
  up to 3 elements; from 4 that SIMD sort may order ties otherwise). AP is VOC 2011's interpolated area
  (``interpolated_prec_rec``). mAP averages over the classes that have ground truth.

Ground truth is scored as written: segments past the video's ends and zero-length segments (``[0, 0]`` in the
v1.3 file) count as the official code counts them. One difference is left: the official tIoU of two zero-length
segments is 0 / 0 = NaN, which its detection loop takes for a match; here it is 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

TIOU_THRESHOLDS: np.ndarray = np.linspace(0.5, 0.95, 10)
"""The ActivityNet thresholds 0.5:0.05:0.95 (float64 [10])."""

NUM_GRID_POINTS = 100  # points of the official AR-AN curve


def segment_iou(segments: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Temporal IoU of every segment with every target.

    Args:
        segments: float [N, 2] (start, end), any time unit.
        targets: float [M, 2] in the same unit.

    Returns:
        float64 [N, M]; 0 where the union is empty (two zero-length segments at one point).
    """
    a = np.asarray(segments, dtype=np.float64).reshape(-1, 2)
    b = np.asarray(targets, dtype=np.float64).reshape(-1, 2)
    inter = (np.minimum(a[:, None, 1], b[None, :, 1]) - np.maximum(a[:, None, 0], b[None, :, 0])).clip(0)
    union = (a[:, 1] - a[:, 0])[:, None] + (b[:, 1] - b[:, 0])[None, :] - inter
    with np.errstate(divide='ignore', invalid='ignore'):
        return np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)


def interpolated_ap(precision: np.ndarray, recall: np.ndarray) -> float:
    """VOC 2011 interpolated average precision (the official ``interpolated_prec_rec``).

    Args:
        precision: float [P], precision after each of the P ranked predictions.
        recall: float [P], recall after each prediction (non-decreasing).

    Returns:
        the area under the precision envelope (precision made non-increasing from the right), summed where the
        recall changes; the recall is closed at 1 with precision 0.
    """
    mprec = np.concatenate([[0.0], np.asarray(precision, dtype=np.float64), [0.0]])
    mrec = np.concatenate([[0.0], np.asarray(recall, dtype=np.float64), [1.0]])
    mprec = np.maximum.accumulate(mprec[::-1])[::-1]
    idx = np.nonzero(mrec[1:] != mrec[:-1])[0] + 1
    return float(np.sum((mrec[idx] - mrec[idx - 1]) * mprec[idx]))


TIED_SCORES_WARNING = 0.5
"""The share of tied scores above which :class:`LocalizationMetric` warns (see :func:`tied_score_fraction`)."""


def tied_score_fraction(groups: Sequence[np.ndarray]) -> float:
    """The share of scores that equal another score of their group.

    Why: the official code ranks with numpy's unstable sort (``argsort()[::-1]``), whose order of ties depends on
    the numpy version and the CPU, so on a file of mostly tied scores its numbers are not reproducible; here ties
    keep their input order. A group is what one sort ranks: a video's proposals (AR@AN) or a class's detections
    over all videos (mAP).

    Args:
        groups: per group, float [K] scores.

    Returns:
        tied scores / all scores, in [0, 1] (0 without scores).
    """
    total = tied = 0
    for group in groups:
        scores = np.asarray(group, dtype=np.float64).reshape(-1)
        total += scores.size
        if scores.size > 1:
            _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
            tied += int(np.count_nonzero(counts[inverse.reshape(-1)] > 1))
    return tied / total if total else 0.0


def _trapezoid(y: np.ndarray, x: np.ndarray) -> float:
    return float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2.0))


def _first_hits(gt: np.ndarray, proposals: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """0-based rank of the first proposal reaching each threshold for each gt: float [T, G] (inf: none)."""
    if proposals.shape[0] == 0:
        return np.full((thresholds.size, gt.shape[0]), np.inf)
    hit = segment_iou(gt, proposals[:, :2])[None] >= thresholds[:, None, None]  # [T, G, K]
    return np.where(hit.any(2), hit.argmax(2), np.inf)


def average_recall_vs_num_proposals(
    gt_segments: Sequence[np.ndarray],
    proposals: Sequence[np.ndarray],
    max_avg_proposals: float = 100.0,
    tiou_thresholds: np.ndarray | Sequence[float] = TIOU_THRESHOLDS,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The AR-AN curve of ``eval_proposal.py``.

    Args:
        gt_segments: per video, float [G_v, 2] ground-truth (start, end) in seconds; videos with no ground truth
            are not evaluated (their proposals still count in the cut ratio, as in the official code).
        proposals: per video (same order), float [K_v, 3] (start, end, score) in seconds, any order.
        max_avg_proposals: the largest average number of proposals per video (AN), 100 for ActivityNet.
        tiou_thresholds: float [T].

    Returns:
        recall float64 [T, 100] (per threshold and grid point), avg_recall float64 [100] (mean over thresholds)
        and proposals_per_video float64 [100] (the AN of each grid point: 1..100 for ``max_avg_proposals=100``).

    Raises:
        ValueError: lists of different lengths, or no video with ground truth.
    """
    if len(gt_segments) != len(proposals):
        raise ValueError(f'average_recall_vs_num_proposals: {len(gt_segments)} ground-truth lists but '
                         f'{len(proposals)} proposal lists')
    thresholds = np.asarray(tiou_thresholds, dtype=np.float64).reshape(-1)
    gts = [np.asarray(g, dtype=np.float64).reshape(-1, 2) for g in gt_segments]
    props = [np.asarray(p, dtype=np.float64).reshape(-1, 3) for p in proposals]
    evaluated = [i for i, g in enumerate(gts) if g.shape[0]]
    num_videos = len(evaluated)
    if num_videos == 0:
        raise ValueError('average_recall_vs_num_proposals: no video has a ground-truth segment')
    total = sum(p.shape[0] for p in props)
    ratio = max_avg_proposals * float(num_videos) / total if total else 0.0

    hits, widths, total_kept = [], [], 0
    for i in evaluated:
        p = props[i]
        order = np.argsort(-p[:, 2], kind='stable')
        kept = min(int(p.shape[0] * ratio), p.shape[0])
        total_kept += kept
        hits.append(_first_hits(gts[i], p[order[:kept]], thresholds))
        widths.append(kept if p.shape[0] else 1)  # the official code gives a video without proposals one column

    grid = np.arange(1, NUM_GRID_POINTS + 1) / 100.0
    if total_kept == 0:
        recall = np.zeros((thresholds.size, NUM_GRID_POINTS))
        return recall, recall.mean(0), grid * max_avg_proposals
    pcn = grid * (max_avg_proposals * float(num_videos) / total_kept)
    matches = np.zeros((thresholds.size, NUM_GRID_POINTS))
    for first, width in zip(hits, widths):
        counts = np.minimum((width * pcn).astype(int), width)  # [100] proposals kept at each grid point
        matches += (first[:, :, None] < counts[None, None, :]).sum(1)
    positives = sum(gts[i].shape[0] for i in evaluated)
    recall = matches / positives
    return recall, recall.mean(0), pcn * (float(total_kept) / num_videos)


def area_under_ar_an(avg_recall: np.ndarray, proposals_per_video: np.ndarray) -> float:
    """The official AUC of the AR-AN curve as a fraction: ``trapezoid / proposals_per_video[-1]`` (the official
    code reports 100 times it, in percent; the suite keeps every metric a fraction 0–1).

    Args:
        avg_recall: float [P] recall in [0, 1] at each grid point.
        proposals_per_video: float [P], increasing.

    Returns:
        a float in [0, 1) (the area starts at the first grid point, AN = 1, so a perfect curve scores 0.99).
    """
    return _trapezoid(np.asarray(avg_recall, float), np.asarray(proposals_per_video, float)) \
        / float(proposals_per_video[-1])


def _match_video(gt: np.ndarray, preds: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Greedy matching inside one video and class: bool [T, P] true positives of ``preds`` (float [P, >=2],
    already in score order) against ``gt`` (float [G, 2]); each gt matches at most one prediction per threshold,
    the free gt of highest tIoU reaching the threshold, the last listed of equal ones (the official order).
    """
    tp = np.zeros((thresholds.size, preds.shape[0]), dtype=bool)
    if gt.shape[0] == 0 or preds.shape[0] == 0:
        return tp
    tiou = segment_iou(preds[:, :2], gt)  # [P, G]
    locked = np.zeros((thresholds.size, gt.shape[0]), dtype=bool)
    reach = tiou.max(1) >= thresholds.min()
    for k in np.nonzero(reach)[0]:  # predictions below every threshold stay false positives
        cand = (tiou[k][None, :] >= thresholds[:, None]) & ~locked  # [T, G]
        has = cand.any(1)
        # the highest tIoU; of equal ones the last listed (argmax of the reversed row takes the first maximum)
        best = gt.shape[0] - 1 - np.where(cand, tiou[k][None, :], -1.0)[:, ::-1].argmax(1)
        tp[has, k] = True
        locked[np.nonzero(has)[0], best[has]] = True
    return tp


def class_average_precision(
    gt_segments: Sequence[np.ndarray],
    predictions: Sequence[np.ndarray],
    tiou_thresholds: np.ndarray | Sequence[float] = TIOU_THRESHOLDS,
) -> np.ndarray:
    """Detection AP of one class over several videos (``compute_average_precision_detection``).

    Args:
        gt_segments: per video, float [G_v, 2] ground truth of this class (seconds).
        predictions: per video (same order), float [P_v, 3] (start, end, score) of this class.
        tiou_thresholds: float [T].

    Returns:
        float64 [T]: the interpolated AP at each threshold (NaN when the class has no ground truth).
    """
    thresholds = np.asarray(tiou_thresholds, dtype=np.float64).reshape(-1)
    npos = sum(np.asarray(g).reshape(-1, 2).shape[0] for g in gt_segments)
    if npos == 0:
        return np.full(thresholds.size, np.nan)
    scores, tps = [], []
    for gt, pred in zip(gt_segments, predictions):
        pred = np.asarray(pred, dtype=np.float64).reshape(-1, 3)
        order = np.argsort(-pred[:, 2], kind='stable')
        pred = pred[order]
        scores.append(pred[:, 2])
        tps.append(_match_video(np.asarray(gt, dtype=np.float64).reshape(-1, 2), pred, thresholds))
    if not scores or sum(s.size for s in scores) == 0:
        return np.zeros(thresholds.size)
    score = np.concatenate(scores)
    tp = np.concatenate(tps, axis=1)[:, np.argsort(-score, kind='stable')].astype(np.float64)
    tp_cum = np.cumsum(tp, axis=1)
    fp_cum = np.cumsum(1.0 - tp, axis=1)
    recall = tp_cum / npos
    precision = tp_cum / (tp_cum + fp_cum)
    return np.array([interpolated_ap(precision[t], recall[t]) for t in range(thresholds.size)])


def detection_average_precision(
    gt_segments: Sequence[np.ndarray],
    gt_labels: Sequence[np.ndarray],
    detections: Sequence[np.ndarray],
    num_classes: int,
    tiou_thresholds: np.ndarray | Sequence[float] = TIOU_THRESHOLDS,
) -> np.ndarray:
    """AP of every class at every threshold (``ANETdetection.wrapper_compute_average_precision``).

    Args:
        gt_segments: per video, float [G_v, 2] (start, end) in seconds.
        gt_labels: per video, int [G_v] class ids in ``0..num_classes-1``.
        detections: per video (same order), float [P_v, 4] (start, end, score, class id).
        num_classes: C.
        tiou_thresholds: float [T].

    Returns:
        float64 [T, C]; NaN columns for classes without ground truth (the official code leaves them out of the
        mean: use ``np.nanmean(ap, 1)``). Detections of such classes are ignored.
    """
    if not len(gt_segments) == len(gt_labels) == len(detections):
        raise ValueError(f'detection_average_precision: {len(gt_segments)} ground-truth lists, {len(gt_labels)} '
                         f'label lists and {len(detections)} detection lists')
    gts = [np.asarray(g, dtype=np.float64).reshape(-1, 2) for g in gt_segments]
    labels = [np.asarray(lb, dtype=np.int64).reshape(-1) for lb in gt_labels]
    dets = [np.asarray(d, dtype=np.float64).reshape(-1, 4) for d in detections]
    det_labels = [np.rint(d[:, 3]).astype(np.int64) for d in dets]
    ap = np.full((np.asarray(tiou_thresholds).size, num_classes), np.nan)
    present = np.unique(np.concatenate(labels)) if labels else np.zeros(0, np.int64)
    for c in present:
        ap[:, c] = class_average_precision([g[lb == c] for g, lb in zip(gts, labels)],
                                           [d[dl == c, :3] for d, dl in zip(dets, det_labels)], tiou_thresholds)
    return ap
