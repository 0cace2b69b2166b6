"""BMN's candidate proposals: boundary peaks from the start/end probabilities, paired through the BM confidence
map (MMAction2's ``BMN.predict``, vectorised over the [D, T] map instead of two Python loops), and the kept
proposals turned into seconds. NumPy only: the deployed predictor and training-side evaluation share it."""

from __future__ import annotations

import numpy as np


def boundary_candidates(prob: np.ndarray, first: bool) -> np.ndarray:
    """Which positions may be a boundary: a strict local maximum, or a probability above half the sequence's
    maximum (BSN/BMN's rule, so that both sharp peaks and long plateaus of high probability are tried).

    Args:
        prob: float [..., T] start (or end) probabilities.
        first: True for starts: position 0 is always a candidate and position T-1 never (a start there has no
            room for an end); False for ends: position T-1 always, position 0 never. As MMAction2's loops, which
            only test the interior positions 1..T-2.

    Returns:
        np.ndarray: bool [..., T].
    """
    prob = np.asarray(prob)
    t = prob.shape[-1]
    out = np.zeros(prob.shape, dtype=bool)
    if t >= 3:
        mid = prob[..., 1:-1]
        peak = (mid > prob[..., 2:]) & (mid > prob[..., :-2])
        out[..., 1:-1] = peak | (mid > 0.5 * prob.max(axis=-1, keepdims=True))
    out[..., 0 if first else t - 1] = True
    return out


def bmn_proposals(start: np.ndarray, end: np.ndarray, confidence: np.ndarray) -> np.ndarray:
    """Every (start, end) pair of boundary candidates that the BM map scores, for one video.

    Map cell ``[d, s]`` is the proposal from position ``s`` to position ``e = s + d + 1`` (normalised time
    ``s / T`` to ``e / T``); a pair is kept when ``s`` is a start candidate, ``e`` an end candidate and
    ``e < T`` (as MMAction2: the last index is the latest end). Its score is
    ``start[s] * end[e] * cls[d, s] * reg[d, s]``.

    Args:
        start, end: float [T] boundary probabilities (the localiser graph's ``start`` / ``end`` rows).
        confidence: float [2, D, T], channel 0 the regressed IoU, channel 1 the classified IoU (BMN's order).

    Returns:
        np.ndarray: [K, 3] of the inputs' float dtype (start, end in normalised time, score), in [d, s] order.

    Raises:
        ValueError: shapes that do not fit (naming them).
    """
    start, end, confidence = np.asarray(start), np.asarray(end), np.asarray(confidence)
    t = start.shape[-1]
    if start.ndim != 1 or end.shape != start.shape or confidence.ndim != 3 or confidence.shape[0] != 2 \
            or confidence.shape[2] != t:
        raise ValueError(f"bmn_proposals: expected start [T], end [T], confidence [2, D, T]; got "
                         f"{start.shape}, {end.shape}, {confidence.shape}")
    d = confidence.shape[1]
    dtype = np.result_type(start.dtype, end.dtype, confidence.dtype, np.float32)
    starts = boundary_candidates(start, first=True)
    ends = boundary_candidates(end, first=False)
    s_idx = np.broadcast_to(np.arange(t), (d, t))
    e_idx = s_idx + np.arange(1, d + 1)[:, None]
    e_safe = np.minimum(e_idx, t - 1)
    keep = (e_idx < t) & starts[s_idx] & ends[e_safe]
    score = start[s_idx] * end[e_safe] * confidence[1] * confidence[0]
    s_k, e_k = s_idx[keep], e_idx[keep]
    return np.stack([s_k.astype(dtype) / t, e_k.astype(dtype) / t, score[keep].astype(dtype)], axis=1)


def proposals_in_seconds(kept: np.ndarray, seconds: float) -> np.ndarray:
    """Soft-NMS output in normalised time -> seconds of the span the features cover (start clamped at 0, end at 1
    before the multiplication, as ``BMN.predict``).

    Args:
        kept: float [K, 3] (start, end in [0, 1]-ish normalised time, score).
        seconds: the span of the feature sequence (``feature_second``, else the duration).

    Returns:
        np.ndarray: [K, 3] of ``kept``'s dtype: start_s, end_s, score.
    """
    kept = np.asarray(kept)
    out = kept[:, :3].copy()
    out[:, 0] = np.maximum(kept[:, 0], 0.0) * seconds
    out[:, 1] = np.minimum(kept[:, 1], 1.0) * seconds
    return out
