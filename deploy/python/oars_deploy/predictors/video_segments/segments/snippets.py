"""Which frames each snippet of a long video takes (``tools/extract_features.py`` and the ``video_segments``
predictor share this rule, so the deployed features are the ones the localiser was trained on).

Snippet ``k`` covers frames ``[k*S, k*S + N)`` (``N`` the snippet length, ``S`` the stride). Only whole snippets
are taken: ``T = (F - N) // S + 1`` for a video of ``F >= N`` frames, and one snippet of the ``F`` frames when
``F < N``. Inside a snippet the recognizer's test-mode sampling runs on a video of ``min(N, F)`` frames and its
indices are shifted by ``k*S``.
"""

from __future__ import annotations

import numpy as np


def num_snippets(total_frames: int, snippet: int, stride: int) -> int:
    """How many snippets a video of ``total_frames`` frames gives: ``(F - N) // S + 1``, or 1 when ``F < N``."""
    if total_frames < snippet:
        return 1
    return (total_frames - snippet) // stride + 1


def snippet_indices(relative: np.ndarray, total_frames: int, snippet: int, stride: int) -> np.ndarray:
    """Every snippet's absolute frame indices.

    Args:
        relative: int [K] the sampler's indices inside one snippet window of ``min(N, F)`` frames.
        total_frames: F. snippet: N. stride: S.

    Returns:
        np.ndarray: int64 [T, K], row ``k`` = ``relative + k*S`` (T = :func:`num_snippets`).
    """
    count = num_snippets(int(total_frames), int(snippet), int(stride))
    starts = np.arange(count, dtype=np.int64)[:, None] * int(stride)
    return starts + np.asarray(relative, dtype=np.int64).reshape(1, -1)


def feature_seconds(count: int, stride: int, total_frames: int, duration_second: float) -> float:
    """The seconds the T snippet features span, which a localiser's [0, 1] proposal times are multiplied by:
    ``feature_frame / F * duration`` with ``feature_frame = min(T * S, F)`` (``videos.json``'s fields, read by
    ``ActivityNetFeatureDataset`` as ``feature_second``)."""
    feature_frame = min(int(count) * int(stride), int(total_frames))
    return float(feature_frame) / float(total_frames) * float(duration_second)
