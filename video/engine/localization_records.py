"""From a localiser's predicted data samples to what the pictures and the report need: one plain record per video,
its video file and frames, its timeline picture, and the numbers of a set of records (shared by the hooks).

A record is a dict: ``name`` (str), ``duration`` (float seconds), ``gt`` (float64 [N, 2] seconds), ``gt_labels``
(int64 [N]), ``proposals`` (float64 [K, 3] start_s, end_s, score, best first), ``segments`` (float64 [K', 4] with
a class id, or None for a proposal-only model) and ``video`` (the video file's path, or None).
"""

from __future__ import annotations

import os.path as osp
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from oars_deploy.predictors.video_segments.timeline import draw_timeline
from video.evaluation.activitynet_eval import (
    NUM_GRID_POINTS,
    TIOU_THRESHOLDS,
    area_under_ar_an,
    average_recall_vs_num_proposals,
    detection_average_precision,
    segment_iou,
)

VIDEO_SUFFIXES = ('.mp4', '.avi', '.mkv', '.webm', '.mov', '.m4v')


def is_localization_dataset(dataset: Any) -> bool:
    """Whether a test dataset holds timed segments (the localisation hooks apply): ActivityNet-style datasets."""
    from video.datasets.activitynet import ActivityNetFeatureDataset

    return isinstance(dataset, ActivityNetFeatureDataset)


def video_folder(dataset: Any) -> str | None:
    """The folder of the video files: the dataset's ``data_prefix['video']`` (joined with ``data_root`` by the
    dataset), or None when the config names none (timelines are then drawn without frames)."""
    folder = (getattr(dataset, 'data_prefix', None) or {}).get('video')
    return folder if folder and osp.isdir(folder) else None


def find_video(folder: str | None, name: str) -> str | None:
    """``<folder>/<name><suffix>`` for the first of :data:`VIDEO_SUFFIXES` that exists, else None."""
    if not folder:
        return None
    for suffix in VIDEO_SUFFIXES:
        path = osp.join(folder, name + suffix)
        if osp.isfile(path):
            return path
    return None


def _array(value: Any, width: int) -> np.ndarray:
    if value is None:
        return np.zeros((0, width))
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().double().numpy()
    arr = np.asarray(value, dtype=np.float64)
    return arr.reshape(-1, width) if arr.size else np.zeros((0, width))


def localization_record(sample: Any, folder: str | None) -> dict[str, Any]:
    """The record (module docstring) of one predicted data sample (``proposals`` from the model's predict mode;
    ``gt_segments``, ``duration_second`` and ``video_name`` in its metainfo, from ``PackLocalizationInputs``)."""
    meta = sample.metainfo
    name = str(meta.get('video_name', '?'))
    proposals = _array(sample.get('proposals'), 3)
    proposals = proposals[np.argsort(-proposals[:, 2], kind='stable')]
    segments = sample.get('segments')
    gt = _array(meta.get('gt_segments'), 2)
    labels = sample.get('gt_labels')
    labels = np.zeros(len(gt), np.int64) if labels is None else np.asarray(
        labels.cpu() if isinstance(labels, torch.Tensor) else labels, np.int64).reshape(-1)
    duration = float(meta.get('duration_second') or meta.get('feature_second') or 0.0)
    ends = [duration] + [float(a[:, 1].max()) for a in (gt, proposals) if len(a)]
    return {'name': name, 'duration': max(ends) if max(ends) > 0 else 1.0, 'gt': gt, 'gt_labels': labels,
            'proposals': proposals, 'segments': None if segments is None else _array(segments, 4),
            'video': find_video(folder, name)}


def read_frames(path: str | None, count: int = 12) -> list[np.ndarray] | None:
    """``count`` frames evenly spaced over a video (frame k at ``(k + 0.5) / count`` of it), uint8 BGR, or None
    when there is no file or it cannot be read (a picture without frames beats no picture)."""
    if path is None:
        return None
    from oars.errors import OarsError
    from video.datasets.decoders import open_video

    try:
        with open_video(path) as reader:
            total = int(reader.total_frames)
            inds = np.minimum(((np.arange(count) + 0.5) * total / count).astype(np.int64), total - 1)
            return [np.ascontiguousarray(f) for f in reader.get_frames(inds)]
    except (OarsError, OSError, ValueError):
        return None


def video_recall(record: dict[str, Any], max_proposals: int = 100,
                 tiou_thresholds: np.ndarray = TIOU_THRESHOLDS) -> float:
    """One video's recall with its top ``max_proposals`` proposals, averaged over the tIoU thresholds (its share
    of AR@100); NaN without ground truth."""
    gt, props = record['gt'], record['proposals'][:max_proposals]
    if not len(gt):
        return float('nan')
    if not len(props):
        return 0.0
    best = segment_iou(gt, props[:, :2]).max(axis=1)  # [G]
    return float((best[None, :] >= np.asarray(tiou_thresholds)[:, None]).mean())


def timeline_picture(record: dict[str, Any], class_names: Sequence[str], top_k: int = 5,
                     frames: list[np.ndarray] | None = None, title: str | None = None) -> np.ndarray:
    """:func:`draw_timeline` of a record: the ground truth against its ``top_k`` best segments (labelled
    detections when the model gives them, else proposals).

    Returns:
        uint8 BGR [H, 1280, 3].
    """
    names = [str(c) for c in class_names]
    if record['segments'] is not None and len(record['segments']):
        segs = record['segments'][np.argsort(-record['segments'][:, 2], kind='stable')][:top_k]
        predicted = [(s, e, int(c) if 0 <= int(c) < len(names) else None, p) for s, e, p, c in segs]
    else:
        predicted = [(s, e, None, p) for s, e, p in record['proposals'][:top_k]]
    gt = [(s, e, int(c) if 0 <= int(c) < len(names) else None) for (s, e), c in zip(record['gt'], record['gt_labels'])]
    if title is None:
        recall = video_recall(record)
        title = f"{record['name']}: {len(gt)} ground-truth segments, top {len(predicted)} of " \
                f"{len(record['proposals'])} predicted" + ('' if np.isnan(recall) else f', recall@100 {recall:.2f}')
    return draw_timeline(record['duration'], predicted, gt, frames, names, title=title)


def summarize(records: Sequence[dict[str, Any]], num_classes: int, proposals: Sequence[np.ndarray] | None = None,
              segments: Sequence[np.ndarray | None] | None = None, max_avg_proposals: float = 100.0) -> dict:
    """The headline numbers of a set of records (or of other predictions for the same videos, e.g. the random
    baseline's): AR@1/5/10/100 and AUC of the AR-AN curve, and detection mAP@0.5 and mAP (0.5:0.05:0.95) --
    per class on labelled ``segments`` when every video has them, else class-agnostic on the proposals.

    Returns:
        ``{'AR@1', 'AR@5', 'AR@10', 'AR@100', 'AUC', 'mAP@0.5', 'mAP', 'map_kind'}`` ('per-class' or
        'class-agnostic') plus ``avg_recall`` / ``proposals_per_video`` (float64 [100], the curve) and
        ``class_ap`` (float64 [C], AP averaged over the thresholds, NaN without ground truth).
    """
    gts = [r['gt'] for r in records]
    props = [r['proposals'] for r in records] if proposals is None else list(proposals)
    segs = [r['segments'] for r in records] if segments is None else list(segments)
    _, avg_recall, per_video = average_recall_vs_num_proposals(gts, props, max_avg_proposals, TIOU_THRESHOLDS)
    out: dict[str, Any] = {}
    for k in (1, 5, 10, 100):
        index = int(round(k * NUM_GRID_POINTS / max_avg_proposals)) - 1
        if 0 <= index < NUM_GRID_POINTS:
            out[f'AR@{k}'] = float(avg_recall[index])
    out['AUC'] = area_under_ar_an(avg_recall, per_video)
    if all(s is not None for s in segs):
        labels, dets, classes, kind = [r['gt_labels'] for r in records], segs, num_classes, 'per-class'
    else:
        labels = [np.zeros(len(g), np.int64) for g in gts]
        dets = [np.concatenate([p[:, :3], np.zeros((len(p), 1))], axis=1) for p in props]
        classes, kind = 1, 'class-agnostic'
    ap = detection_average_precision(gts, labels, dets, classes, TIOU_THRESHOLDS)  # [T, C]
    with warnings.catch_warnings():  # nanmean of all-NaN rows (a class without ground truth) is NaN on purpose
        warnings.simplefilter('ignore', RuntimeWarning)
        per_threshold = np.nan_to_num(np.nanmean(ap, axis=1))
        class_ap = np.nanmean(ap, axis=0)
    half = int(np.argmin(np.abs(TIOU_THRESHOLDS - 0.5)))
    out.update({'mAP@0.5': float(per_threshold[half]), 'mAP': float(per_threshold.mean()), 'map_kind': kind,
                'avg_recall': avg_recall, 'proposals_per_video': per_video, 'class_ap': class_ap})
    return out
