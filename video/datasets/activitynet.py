"""ActivityNet-style temporal action localisation annotations with one feature file per video (BMN, BSN).

Accepted annotation files (JSON):

- ActivityNet v1.3: ``{"database": {video_id: {"duration": float, "subset": "training" | "validation" |
  "testing", "annotations": [{"segment": [start, end], "label": str}, ...]}, ...}, ...}`` (``duration_second``
  is read first, ``duration`` when it is absent);
- MMAction2's per-split file: ``{video_name: {"duration_second", "duration_frame", "feature_frame",
  "annotations"}, ...}`` (no ``subset``: leave ``subset`` null);
- MMAction2's older flattened list: ``[{"video_name", "duration_second", "duration_frame", "feature_frame",
  "annotations"}, ...]``.

Why the checks happen here, once: a segment beyond the video, a reversed segment or an unknown label in a
20 000-video file would otherwise surface as a wrong target deep inside a training run; each message names the
annotation file and the video id.

Segments are kept as written (``GenerateLocalizationLabels`` clips the training targets to the video), because the
official evaluation scores them so. Zero-length segments (``[0, 0]``: the v1.3 file holds some,
activitynet/ActivityNet#56) are no target: a training set (not ``test_mode``) skips them, an evaluation set keeps
them as the official evaluator does (ground truth nothing can match); either way one warning counts them.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Callable, Sequence

import numpy as np

from oars.data import storage
from oars.errors import DataError, DataFileNotFoundError
from video.datasets.base import VideoBaseDataset, read_classes
from video.registry import DATASETS

FEATURE_SUFFIXES = ('.npy', '.csv')


def read_annotation_file(path: str) -> dict[str, dict]:
    """The videos of an annotation file in any accepted layout: ``{video_id: info dict}``.

    Raises:
        DataFileNotFoundError: no such file.
        DataError: unreadable or malformed JSON, no video, a video entry that is not a dict.
    """
    if not storage.isfile(path):
        raise DataFileNotFoundError(f'ActivityNetFeatureDataset: annotation file not found: {path}')
    try:
        with storage.open_file(path, 'r', encoding='utf-8') as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f'ActivityNetFeatureDataset: {path} is not a readable JSON file ({err})') from None
    if isinstance(data, dict) and 'database' in data:
        data = data['database']
    if isinstance(data, list):
        videos = {}
        for k, item in enumerate(data):
            if not isinstance(item, dict) or not isinstance(item.get('video_name'), str):
                raise DataError(f"ActivityNetFeatureDataset: {path}: entry {k} of the list has no 'video_name' "
                                '(expected [{"video_name", "duration_second", "annotations"}, ...])')
            videos[item['video_name']] = item
        data = videos
    if not isinstance(data, dict) or not data:
        raise DataError(f'ActivityNetFeatureDataset: {path} holds no videos (expected {{"database": {{video_id: '
                        '{"duration_second", "subset", "annotations"}}}}, a dict of videos or a list of videos)')
    bad = [vid for vid, info in data.items() if not isinstance(info, dict)]
    if bad:
        raise DataError(f'ActivityNetFeatureDataset: {path}: video {bad[0]!r} is not a dict of fields')
    return data


def _number(value: object, where: str, what: str) -> float:
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise DataError(f'{where}: {what} must be a number, got {value!r}') from None
    if not math.isfinite(out):
        raise DataError(f'{where}: {what} must be finite, got {value!r}')
    return out


class ZeroLengthSegmentWarning(UserWarning):
    """Zero-length ground-truth segments were skipped (training) or kept (evaluation)."""


def parse_video(video_id: str, info: dict, class_index: dict[str, int] | None, tolerance: float,
                where: str, keep_zero_length: bool = True) -> dict:
    """One video's checked fields.

    Args:
        video_id: the key (the feature file's stem).
        info: its JSON entry.
        class_index: label name -> id; None maps every label to 0 (class-agnostic proposals).
        tolerance: seconds a segment may pass the video's ends (also 1 % of the duration, whichever is larger)
            before it is an error; within it the segment is kept as written.
        where: ``'FILE video ID'`` for messages.
        keep_zero_length: keep zero-length segments (end == start) as ground truth (evaluation) or leave them out
            (training).

    Returns:
        ``video_name``, ``duration_second`` (``duration_second`` or, in ActivityNet's own file, ``duration``),
        ``duration_frame`` / ``feature_frame`` (int or None), ``feature_second`` (the seconds the features cover:
        ``feature_frame / duration_frame * duration_second`` when both are given, as MMAction2's corrected second,
        else ``duration_second``), ``gt_segments`` (float64 [N, 2] seconds, as written), ``gt_labels`` (int64 [N])
        and ``zero_length`` (how many zero-length segments it holds, kept or not).

    Raises:
        DataError: a missing or non-positive duration, a malformed or reversed (end < start) segment, one outside
            the video by more than the tolerance, an unknown label.
    """
    key = 'duration' if info.get('duration_second') is None and info.get('duration') is not None else \
        'duration_second'
    duration = _number(info.get(key), where, repr(key) if key in info else "'duration_second' (or 'duration')")
    if duration <= 0:
        raise DataError(f'{where}: {key!r} must be positive, got {duration}')
    frames = {k: info.get(k) for k in ('duration_frame', 'feature_frame')}
    for k, v in frames.items():
        if v is not None and _number(v, where, repr(k)) <= 0:
            raise DataError(f'{where}: {k!r} must be positive, got {v!r}')
    feature_second = duration
    if frames['duration_frame'] is not None and frames['feature_frame'] is not None:
        feature_second = float(frames['feature_frame']) / float(frames['duration_frame']) * duration
    anns = info.get('annotations') or []
    if not isinstance(anns, list):
        raise DataError(f"{where}: 'annotations' must be a list of {{'segment': [start, end], 'label': name}}")
    slack = max(tolerance, 0.01 * duration)
    segments, labels, zero_length = [], [], 0
    for k, ann in enumerate(anns):
        here = f'{where} annotation {k}'
        seg = ann.get('segment') if isinstance(ann, dict) else None
        if not isinstance(seg, (list, tuple)) or len(seg) != 2:
            raise DataError(f"{here}: expected {{'segment': [start, end], 'label': name}}, got {ann!r}")
        start, end = (_number(v, here, 'segment') for v in seg)
        if end < start:
            raise DataError(f'{here}: segment [{start}, {end}] ends before it starts (end < start)')
        # a segment may not start at the end (nothing of it in the video) unless it has no length at all
        if start < -slack or end > duration + slack or (start >= duration and end > start):
            raise DataError(f'{here}: segment [{start}, {end}] lies outside the video [0, {duration}] s by more '
                            f'than the tolerance {slack:g} s (segment_tolerance)')
        label = ann.get('label')
        if class_index is not None and label not in class_index:
            names = list(class_index)
            raise DataError(f'{here}: label {label!r} is not one of the {len(names)} classes '
                            f'{names[:10]}{"..." if len(names) > 10 else ""}')
        if end == start:
            zero_length += 1
            if not keep_zero_length:
                continue
        segments.append([start, end])
        labels.append(0 if class_index is None else class_index[label])
    return dict(video_name=video_id, duration_second=duration,
                duration_frame=None if frames['duration_frame'] is None else int(frames['duration_frame']),
                feature_frame=None if frames['feature_frame'] is None else int(frames['feature_frame']),
                feature_second=feature_second,
                gt_segments=np.asarray(segments, dtype=np.float64).reshape(-1, 2),
                gt_labels=np.asarray(labels, dtype=np.int64), zero_length=zero_length)


def warn_zero_length(counts: dict[str, int], ann_file: str, owner: str, kept: bool) -> None:
    """One warning for all the zero-length segments of a file: how many, in how many videos, the first ids.

    Args:
        counts: video id -> its zero-length segments (only videos with some).
        ann_file: the annotation file, named in the message.
        owner: the dataset class name.
        kept: whether they were kept as ground truth (``test_mode``) or skipped.
    """
    total, ids = sum(counts.values()), list(counts)
    shown = ', '.join(ids[:5]) + (f' and {len(ids) - 5} more' if len(ids) > 5 else '')
    what = ('kept them as ground truth, as the official ActivityNet evaluation does: no prediction can match them '
            '(test_mode)') if kept else 'skipped them: no training target can be made of them (not test_mode)'
    warnings.warn(f'{owner}: {ann_file} has {total} zero-length segment(s) (end == start) in {len(ids)} video(s) '
                  f'({shown}); {what}', ZeroLengthSegmentWarning, stacklevel=3)


def labels_in(videos: dict[str, dict]) -> list[str]:
    """The sorted distinct label names of every annotation of every video (all subsets, so that the training and
    validation datasets agree on the ids)."""
    names = {a.get('label') for info in videos.values() for a in (info.get('annotations') or [])
             if isinstance(a, dict)}
    return sorted(str(n) for n in names if n is not None)


@DATASETS.register_module()
class ActivityNetFeatureDataset(VideoBaseDataset):
    """Videos of an ActivityNet-style annotation file, each with a feature file ``<video_id><feature_suffix>``
    (T x C: ``.npy`` float array, or ``.csv`` with a header row then T rows of C values, MMAction2's layout)
    under ``data_root`` joined with ``data_prefix['feature']``.

    Args:
        ann_file: the JSON file (relative: under ``data_root``).
        subset: keep videos of this ``subset`` (a name or a list of names); None keeps all (needed for files
            without ``subset``).
        classes: label names (a list or a text file); None: every label in the file, sorted. With
            ``class_agnostic`` (BMN proposals) the default is ``['action']`` and every segment gets label 0.
        class_agnostic: ignore the labels (one foreground class).
        feature_suffix: ``'.npy'`` or ``'.csv'``.
        segment_tolerance: seconds a segment may pass the video's ends before it is an error (1 % of the
            duration when larger); such segments are kept as written (the training targets are clipped by
            ``GenerateLocalizationLabels``; the metric scores them as written, as the official code).
        filter_empty_gt: drop videos without annotations unless ``test_mode``.
        data_root, data_prefix, pipeline, test_mode, on_bad_sample, ...: as ``VideoBaseDataset``.

    Each sample: ``video_name``, ``feature_path``, ``duration_second``, ``duration_frame``, ``feature_frame``,
    ``feature_second``, ``gt_segments`` (float64 [N, 2] s, as written) and ``gt_labels`` (int64 [N]).
    Zero-length segments are left out unless ``test_mode`` (module docstring).
    """

    path_key = 'feature_path'

    def __init__(self, ann_file: str, data_root: str = '', data_prefix: dict | None = None,
                 subset: str | Sequence[str] | None = None, classes: str | Sequence[str] | None = None,
                 class_agnostic: bool = False, feature_suffix: str = '.npy', segment_tolerance: float = 1.0,
                 filter_empty_gt: bool = True, pipeline: Sequence[dict | Callable] = (), test_mode: bool = False,
                 on_bad_sample: str | None = None, **kwargs) -> None:
        owner = type(self).__name__
        if feature_suffix not in FEATURE_SUFFIXES:
            raise DataError(f'{owner}: feature_suffix must be one of {list(FEATURE_SUFFIXES)}, got {feature_suffix!r}')
        if not ann_file:
            raise DataError(f"{owner}: 'ann_file' (the ActivityNet JSON) is required")
        if segment_tolerance < 0:
            raise DataError(f'{owner}: segment_tolerance must be >= 0 seconds, got {segment_tolerance!r}')
        self.subset = [subset] if isinstance(subset, str) else (None if subset is None else list(subset))
        self.class_agnostic = bool(class_agnostic)
        self.feature_suffix = feature_suffix
        self.segment_tolerance = float(segment_tolerance)
        self.filter_empty_gt = bool(filter_empty_gt)
        path = ann_file if storage.is_url(ann_file) or os.path.isabs(ann_file) or not data_root \
            else storage.join(data_root, ann_file)
        self._videos = read_annotation_file(path)  # read once; load_data_list parses and drops it
        names = read_classes(classes, data_root, owner)
        if names is None:
            names = ['action'] if self.class_agnostic else labels_in(self._videos)
            if not names:
                raise DataError(f"{owner}: {path} has no labelled segment to take the classes from; give 'classes'")
        super().__init__(ann_file=ann_file, data_root=data_root, data_prefix=data_prefix, classes=names,
                         pipeline=pipeline, test_mode=test_mode, on_bad_sample=on_bad_sample, **kwargs)

    def default_prefix(self) -> dict:
        return {'feature': ''}

    def load_data_list(self) -> list[dict]:
        videos = self._videos or read_annotation_file(self.ann_file)
        self._videos = {}
        classes = list(self.metainfo['classes'])
        class_index = None if self.class_agnostic else {c: i for i, c in enumerate(classes)}
        prefix = self.data_prefix['feature']
        out, zero_length = [], {}
        for vid, info in videos.items():
            where = f'{self.ann_file} video {vid}'
            if self.subset is not None:
                if 'subset' not in info:
                    raise DataError(f"{where}: no 'subset' field, but subset {self.subset} is asked for; set "
                                    'subset: null for files split per subset')
                if info['subset'] not in self.subset:
                    continue
            item = parse_video(vid, info, class_index, self.segment_tolerance, where, keep_zero_length=self.test_mode)
            count = item.pop('zero_length')
            if count:
                zero_length[vid] = count
            if self.filter_empty_gt and not self.test_mode and item['gt_segments'].shape[0] == 0:
                continue
            item['feature_path'] = storage.absolute(storage.join(prefix, vid + self.feature_suffix))
            out.append(item)
        if zero_length:
            warn_zero_length(zero_length, self.ann_file, type(self).__name__, kept=self.test_mode)
        if not out:
            raise DataError(f'{type(self).__name__}: {self.ann_file} has no video'
                            + (f' in subset {self.subset}' if self.subset else '')
                            + (' with annotations' if self.filter_empty_gt and not self.test_mode else ''))
        return out
