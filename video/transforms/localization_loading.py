"""Reading one video's snippet features (T x C) for temporal action localisation: ``.npy`` arrays or MMAction2's
``.csv`` files (a header row, then T rows of C comma-separated values). A feature path may be a URL (``s3://``,
``memory://`` ...): its bytes come through ``oars.data.storage`` and are parsed from memory (``np.load`` of bytes)."""

from __future__ import annotations

import io
import os

import numpy as np

from oars.data import storage
from oars.errors import DataError
from video.registry import TRANSFORMS


def _source(path: str) -> str | io.BytesIO:
    """What numpy reads: a local path as it is, a URL's bytes (read through ``oars.data.storage``: a storage error is
    its one-line message naming the URL)."""
    return io.BytesIO(storage.read_bytes(path)) if storage.is_url(path) else path


def read_localization_feature(path: str, where: str) -> np.ndarray:
    """The features of one video.

    Args:
        path: a ``.npy`` file (a 2-D numeric array) or a ``.csv`` file (header row + T rows of C values); a local
            path or a URL.
        where: ``'video ID'`` for messages.

    Returns:
        float32 [T, C], T >= 1, finite.

    Raises:
        DataError: missing, unreadable, not 2-D, empty, or non-finite values (naming the file and video).
    """
    if not storage.isfile(path):
        raise DataError(f'{where}: feature file not found: {path}')
    try:
        if path.endswith('.csv'):
            feat = np.loadtxt(_source(path), dtype=np.float32, delimiter=',', skiprows=1, ndmin=2)
        else:
            feat = np.load(_source(path), allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise DataError(f'{where}: cannot read feature file {path} ({err})') from None
    if feat.ndim != 2 or feat.shape[0] < 1 or feat.shape[1] < 1 or not np.issubdtype(feat.dtype, np.number):
        raise DataError(f'{where}: feature file {path} must hold a numeric T x C array, got shape '
                        f'{tuple(feat.shape)} of {feat.dtype}')
    feat = feat.astype(np.float32, copy=False)
    if not np.isfinite(feat).all():
        raise DataError(f'{where}: feature file {path} has NaN or infinite values')
    return feat


@TRANSFORMS.register_module()
class LoadLocalizationFeature:
    """Read ``results['feature_path']`` into ``results['features']`` (float32 [T, C]); set ``feature_length`` (T).

    Args:
        feat_dim: the expected width C (400 for the CUHK ActivityNet features BMN uses); another width is an
            error naming the file, since a model built for C channels would fail later with a shape error.
            None skips the check.
    """

    def __init__(self, feat_dim: int | None = None) -> None:
        if feat_dim is not None and (isinstance(feat_dim, bool) or not isinstance(feat_dim, int) or feat_dim < 1):
            raise DataError(f'LoadLocalizationFeature: feat_dim must be a positive int or null, got {feat_dim!r}')
        self.feat_dim = feat_dim

    def __call__(self, results: dict) -> dict:
        if 'feature_path' not in results:
            raise KeyError("LoadLocalizationFeature needs results['feature_path']; is the dataset an "
                           'ActivityNetFeatureDataset?')
        path = str(results['feature_path'])
        where = f"video {results.get('video_name', '?')}"
        feat = read_localization_feature(path, where)
        if self.feat_dim is not None and feat.shape[1] != self.feat_dim:
            raise DataError(f'{where}: feature file {path} has {feat.shape[1]} channels per snippet (shape '
                            f'{tuple(feat.shape)}, T x C), but feat_dim is {self.feat_dim}')
        results['features'] = feat
        results['feature_length'] = int(feat.shape[0])
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}(feat_dim={self.feat_dim})'


SCORES_SUFFIX = '.scores.npy'  # what tools/extract_features.py writes beside <video_id>.npy


@TRANSFORMS.register_module()
class LoadVideoClassScores:
    """Read a video's class probabilities (float [C]: the recognizer's mean over the snippets, written by
    ``tools/extract_features.py`` as ``<video_id>.scores.npy`` beside the features) into
    ``results['class_scores']``, for a localiser whose ``classify`` pairs proposals with classes (detection mAP).

    Args:
        suffix: the scores file is the feature file with its suffix replaced by this (``.scores.npy``).
        num_classes: the expected C (the localisation dataset's classes); None skips the check. The ids must be
            the recognizer's: its classes in the same order as the dataset's.
    """

    def __init__(self, suffix: str = SCORES_SUFFIX, num_classes: int | None = None) -> None:
        if num_classes is not None and (isinstance(num_classes, bool) or not isinstance(num_classes, int)
                                        or num_classes < 1):
            raise DataError(f'LoadVideoClassScores: num_classes must be a positive int or null, got {num_classes!r}')
        self.suffix = str(suffix)
        self.num_classes = num_classes

    def __call__(self, results: dict) -> dict:
        if 'feature_path' not in results:
            raise KeyError("LoadVideoClassScores needs results['feature_path']; is the dataset an "
                           'ActivityNetFeatureDataset?')
        path = os.path.splitext(str(results['feature_path']))[0] + self.suffix
        where = f"video {results.get('video_name', '?')}"
        if not storage.isfile(path):
            raise DataError(f'{where}: class scores file not found: {path} (written by tools/extract_features.py '
                            'beside the features)')
        try:
            scores = np.load(_source(path), allow_pickle=False)
        except (OSError, ValueError, EOFError) as err:
            raise DataError(f'{where}: cannot read class scores file {path} ({err})') from None
        if scores.ndim != 1 or scores.size < 1 or not np.issubdtype(scores.dtype, np.number) \
                or not np.isfinite(scores).all():
            raise DataError(f'{where}: {path} must hold a finite float [C] vector, got {scores.dtype} '
                            f'{tuple(scores.shape)}')
        if self.num_classes is not None and scores.size != self.num_classes:
            raise DataError(f'{where}: {path} has {scores.size} class scores, num_classes is {self.num_classes}')
        results['class_scores'] = scores.astype(np.float32)
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}(suffix={self.suffix!r}, num_classes={self.num_classes})'
