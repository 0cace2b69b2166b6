"""The chance level of temporal action localisation: uniformly random segments.

Why: AR@AN and mAP of a localiser mean little without the score of a model that knows nothing. With 100
proposals per video, random segments already reach a sizeable AR@100 on short videos with long actions; the
report and the demo print this baseline beside the model's numbers so that a reader sees what was learned.

Each video gets as many random segments as the model gave it (so AR@AN compares equal counts), from its own
generator seeded with ``(seed, crc32(video name))``: the baseline of a video does not depend on the order or the
number of the others, and reruns give the same numbers.
"""

from __future__ import annotations

import zlib

import numpy as np


def video_rng(seed: int, video_name: str) -> np.random.Generator:
    """The generator of one video's random segments: seeded with ``(seed, crc32(video_name))``."""
    return np.random.default_rng([int(seed), zlib.crc32(str(video_name).encode('utf-8'))])


def random_segments(duration_s: float, count: int, rng: np.random.Generator, num_classes: int = 0) -> np.ndarray:
    """``count`` segments with start and end drawn uniformly in ``[0, duration_s]`` (sorted pair) and a uniform
    score (the ranking is random too).

    Args:
        duration_s: the video's length in seconds (> 0).
        count: segments to draw (>= 0).
        rng: the video's generator (:func:`video_rng`).
        num_classes: 0 for proposals; C > 0 adds a uniformly random class id column.

    Returns:
        float64 [count, 3] (start_s, end_s, score) by decreasing score, or [count, 4] with the class id when
        ``num_classes`` > 0.

    Raises:
        ValueError: a non-positive duration or a negative count.
    """
    if not np.isfinite(duration_s) or duration_s <= 0:
        raise ValueError(f'random_segments: duration_s must be positive seconds, got {duration_s!r}')
    if count < 0 or num_classes < 0:
        raise ValueError(f'random_segments: count and num_classes must be >= 0, got {count}, {num_classes}')
    ends = np.sort(rng.uniform(0.0, float(duration_s), (int(count), 2)), axis=1)
    scores = rng.uniform(0.0, 1.0, int(count))
    cols = [ends, scores[:, None]]
    if num_classes:
        cols.append(rng.integers(0, int(num_classes), int(count)).astype(np.float64)[:, None])
    out = np.concatenate(cols, axis=1)
    return out[np.argsort(-out[:, 2], kind='stable')]


def random_baseline(videos: list[tuple[str, float, int]], seed: int = 0, num_classes: int = 0) -> list[np.ndarray]:
    """Random segments for each video.

    Args:
        videos: ``(video_name, duration_s, count)`` per video; ``count`` is the number of segments the model
            gave that video.
        seed: the baseline's seed.
        num_classes: as :func:`random_segments` (0: proposals [K, 3]; C: labelled detections [K, 4]).

    Returns:
        one float64 array per video, in the given order.
    """
    return [random_segments(duration, count, video_rng(seed, name), num_classes) for name, duration, count in videos]
