"""Temporal action localisation pipeline steps after loading: resize the feature sequence to the model's temporal
scale, normalise the ground-truth segments, and pack a sample.

Order: ``LoadLocalizationFeature`` -> ``ResizeTemporal`` -> ``GenerateLocalizationLabels`` ->
``PackLocalizationInputs``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from oars.errors import DataError
from oars_deploy.predictors.video_segments.segments.temporal import resize_positions, resize_temporal  # noqa: F401  (one implementation)
from video.registry import TRANSFORMS
from video.structures import ActionDataSample

LOCALIZATION_META_KEYS = ('video_name', 'duration_second', 'duration_frame', 'feature_frame', 'feature_second',
                          'feature_path', 'feature_length', 'gt_segments', 'class_scores')


def _where(results: dict) -> str:
    return f"video {results.get('video_name', '?')} ({results.get('feature_path', 'no feature file')})"


@TRANSFORMS.register_module()
class ResizeTemporal:
    """Resize ``results['features']`` (float32 [T, C]) to ``temporal_dim`` steps by linear interpolation.

    Args:
        temporal_dim: the model's temporal scale (BMN: 100).
        align_corners: sampling rule (see :func:`resize_positions`); default False (centred snippets).
    """

    def __init__(self, temporal_dim: int = 100, align_corners: bool = False) -> None:
        if isinstance(temporal_dim, bool) or not isinstance(temporal_dim, int) or temporal_dim < 1:
            raise DataError(f'ResizeTemporal: temporal_dim must be a positive int, got {temporal_dim!r}')
        self.temporal_dim = temporal_dim
        self.align_corners = bool(align_corners)

    def __call__(self, results: dict) -> dict:
        feat = results.get('features')
        if not isinstance(feat, np.ndarray) or feat.ndim != 2:
            raise KeyError("ResizeTemporal needs results['features'] [T, C]; put LoadLocalizationFeature before it")
        results['features'] = resize_temporal(feat, self.temporal_dim, self.align_corners)
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}(temporal_dim={self.temporal_dim}, align_corners={self.align_corners})'


@TRANSFORMS.register_module()
class GenerateLocalizationLabels:
    """Ground-truth segments in seconds -> ``gt_bbox`` float32 [N, 2] in [0, 1] of the span the features cover
    (``feature_second``, else ``duration_second``), clipped to [0, 1]; ``gt_labels`` int64 [N] as given.

    Why ``feature_second``: MMAction2's features cover ``feature_frame`` of the ``duration_frame`` frames, so
    their last step is at ``feature_frame / duration_frame`` of the video, not at its end.
    """

    def __call__(self, results: dict) -> dict:
        if 'gt_segments' not in results:
            raise KeyError("GenerateLocalizationLabels needs results['gt_segments']; is the dataset an "
                           'ActivityNetFeatureDataset?')
        seconds = results.get('feature_second') or results.get('duration_second')
        if not seconds or seconds <= 0:
            raise DataError(f'{_where(results)}: GenerateLocalizationLabels needs a positive feature_second or '
                            f'duration_second, got {seconds!r}')
        seg = np.asarray(results['gt_segments'], dtype=np.float64).reshape(-1, 2)
        results['gt_bbox'] = np.clip(seg / float(seconds), 0.0, 1.0).astype(np.float32)
        results['gt_labels'] = np.asarray(results.get('gt_labels', np.zeros(len(seg))), dtype=np.int64).reshape(-1)
        if results['gt_labels'].shape[0] != seg.shape[0]:
            raise DataError(f"{_where(results)}: {seg.shape[0]} segments but {results['gt_labels'].shape[0]} labels")
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}()'


@TRANSFORMS.register_module()
class PackLocalizationInputs:
    """Results -> ``{'inputs': float32 tensor [C, T], 'data_samples': ActionDataSample}``.

    The data sample carries ``gt_bbox`` (float32 tensor [N, 2], in [0, 1]) and ``gt_labels`` (int64 tensor [N])
    when ``GenerateLocalizationLabels`` ran, and ``meta_keys`` present in results as metainfo (``gt_segments``:
    float64 [N, 2] seconds, which the metric compares proposals with; ``feature_second``: what a proposal's
    [0, 1] span is multiplied by to get seconds).
    """

    def __init__(self, meta_keys: Sequence[str] = LOCALIZATION_META_KEYS) -> None:
        self.meta_keys = tuple(meta_keys)

    def __call__(self, results: dict) -> dict:
        feat = results.get('features')
        if not isinstance(feat, np.ndarray) or feat.ndim != 2:
            raise DataError(f'{_where(results)}: PackLocalizationInputs needs features [T, C]; put '
                            'LoadLocalizationFeature (and ResizeTemporal) before it')
        inputs = torch.from_numpy(np.ascontiguousarray(feat.T, dtype=np.float32))
        sample = ActionDataSample()
        if 'gt_bbox' in results:
            sample.gt_bbox = torch.from_numpy(np.asarray(results['gt_bbox'], dtype=np.float32).reshape(-1, 2))
            sample.gt_labels = torch.from_numpy(np.asarray(results['gt_labels'], dtype=np.int64).reshape(-1))
        sample.set_metainfo({k: results[k] for k in self.meta_keys if k in results})
        return {'inputs': inputs, 'data_samples': sample}

    def __repr__(self) -> str:
        return f'{type(self).__name__}(meta_keys={self.meta_keys})'
