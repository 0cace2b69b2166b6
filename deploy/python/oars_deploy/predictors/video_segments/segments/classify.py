"""ActivityNet's temporal detections from class-agnostic proposals: each proposal paired with the video's top-k
classes (BSN/BMN's challenge post-processing, where a video-level classifier names the action and the localiser
finds where it happens). NumPy only: the deployed predictor and training-side evaluation share it."""

from __future__ import annotations

import numpy as np


def top_classes(class_scores: np.ndarray, top_k: int) -> np.ndarray:
    """Class ids of the ``top_k`` highest video-level scores, highest first; ties go to the lower class id (as
    argmax and the clip predictors do).

    Args:
        class_scores: float [C] video-level class probabilities.
        top_k: how many (cut to C).

    Returns:
        np.ndarray: int64 [min(top_k, C)].
    """
    scores = np.asarray(class_scores, dtype=np.float64).reshape(-1)
    return np.argsort(-scores, kind="stable")[:max(0, int(top_k))].astype(np.int64)


def combine_classes(proposals: np.ndarray, class_scores: np.ndarray, top_k: int) -> np.ndarray:
    """Detections = every proposal x each of the ``top_k`` best video-level classes, scored
    ``proposal score x class probability``.

    Args:
        proposals: float [K, 3] (start, end, score), any time unit (seconds after :func:`proposals_in_seconds`).
        class_scores: float [C] the video's class probabilities (the recognizer's mean over the snippets).
        top_k: classes per proposal (ActivityNet: 2).

    Returns:
        np.ndarray: float64 [K * k, 4] (start, end, score, class id), k = min(top_k, C), by decreasing score
        (stable: ties keep class-major, then proposal order); the form ``LocalizationMetric`` reads as
        ``segments``.

    Raises:
        ValueError: ``proposals`` not [K, >= 3], ``class_scores`` empty, or ``top_k`` < 1.
    """
    props = np.asarray(proposals, dtype=np.float64)
    if props.ndim != 2 or props.shape[1] < 3:
        raise ValueError(f"combine_classes: proposals must be [K, 3] (start, end, score), got {props.shape}")
    scores = np.asarray(class_scores, dtype=np.float64).reshape(-1)
    if scores.size == 0:
        raise ValueError("combine_classes: class_scores is empty")
    if int(top_k) < 1:
        raise ValueError(f"combine_classes: top_k must be >= 1, got {top_k}")
    ids = top_classes(scores, top_k)
    k, n = ids.size, props.shape[0]
    out = np.empty((k * n, 4), dtype=np.float64)
    out[:, 0] = np.tile(props[:, 0], k)
    out[:, 1] = np.tile(props[:, 1], k)
    out[:, 2] = (scores[ids][:, None] * props[None, :, 2]).reshape(-1)
    out[:, 3] = np.repeat(ids, n)
    return out[np.argsort(-out[:, 2], kind="stable")]
