"""C-TCN's detections from its per-anchor outputs (PaddleVideo ``BoxCoder.decode``), in NumPy: the anchors'
(centre, width) offsets decoded to segments, then per class a score threshold, hard NMS and Gaussian Soft-NMS,
each step vectorised over the classes. ``CTCN.predict`` (through ``video.models.localizers.ctcn_post``) and the
``video_segments`` predictor both run this code, so evaluation and deployment cannot disagree.

Every time here is normalised to [0, 1] of the span the features cover until :func:`detections_in_seconds`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

DECODE_KEYS = ("score_thresh", "nms_thresh", "soft_sigma", "soft_thresh", "pre_nms_top_k", "max_per_video")


def decode_anchors(offsets: np.ndarray, anchors: np.ndarray, variances: Sequence[float]) -> np.ndarray:
    """Segments of the regression head's offsets (the inverse of the training targets' encoding: SSD's scaled
    centre offset and PaddleVideo's linear width ratio).

    Args:
        offsets: float [..., A, 2] (centre, width) offsets, the graph's ``offsets``.
        anchors: float [A, 2] (centre, width) in normalised time.
        variances: (centre, width) scales (C-TCN: 0.1, 0.2).

    Returns:
        np.ndarray: float64 [..., A, 2] (start, end), not clipped.
    """
    off = np.asarray(offsets, dtype=np.float64)
    anc = np.asarray(anchors, dtype=np.float64)
    centre = off[..., 0] * float(variances[0]) * anc[:, 1] + anc[:, 0]
    width = (off[..., 1] * float(variances[1]) + 1.0) * anc[:, 1]
    return np.stack([centre - width / 2, centre + width / 2], axis=-1)


def _iou_with(start: np.ndarray, end: np.ndarray, pick: np.ndarray) -> np.ndarray:
    """Temporal IoU of every segment of each row with that row's segment ``pick`` ([R, K] from [R, K] and [R])."""
    rows = np.arange(start.shape[0])
    s_m, e_m = start[rows, pick][:, None], end[rows, pick][:, None]
    inter = np.maximum(np.minimum(end, e_m) - np.maximum(start, s_m), 0.0)
    union = (end - start) + (e_m - s_m) - inter
    return inter / np.maximum(union, 1e-12)


def nms_rows(segments: np.ndarray, valid: np.ndarray, iou_threshold: float) -> np.ndarray:
    """Greedy hard NMS of many independent sets at once, each row already sorted by decreasing score.

    Step ``j`` keeps the ``j``-th segment of every row where it is still alive and kills the later ones that
    overlap it by more than ``iou_threshold`` (torchvision's ``nms`` rule, one class per row).

    Args:
        segments: float [R, K, 2] (start, end), rows padded.
        valid: bool [R, K], False on padding.
        iou_threshold: overlap above which a lower-scored segment is dropped.

    Returns:
        np.ndarray: bool [R, K], the kept segments.
    """
    start, end = segments[..., 0], segments[..., 1]
    alive = np.array(valid, dtype=bool, copy=True)
    kept = np.zeros_like(alive)
    later = np.arange(alive.shape[1])
    for j in range(alive.shape[1]):
        live = alive[:, j]
        if not live.any():
            if not alive[:, j:].any():
                break
            continue
        kept[:, j] = live
        iou = _iou_with(start, end, np.full(alive.shape[0], j))
        alive &= ~((iou > iou_threshold) & live[:, None] & (later > j)[None, :])
    return kept


def soft_nms_rows(segments: np.ndarray, scores: np.ndarray, sigma: float,
                  min_score: float) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian Soft-NMS (Bodla et al. 2017; PaddleVideo's ``soft_nms(method=2)``) of many independent sets at once.

    Each step keeps the highest-scoring live segment ``m`` of each row and multiplies every other live score by
    ``exp(-iou(i, m)^2 / sigma)``; a score below ``min_score`` dies (PaddleVideo removes it at once: it could only
    be picked after every live one, and then only decays scores already below the threshold, so the kept set is
    the same).

    Args:
        segments: float [R, K, 2] (start, end), rows padded.
        scores: float [R, K]; anything below ``min_score`` (padding, NMS losers) never takes part.
        sigma: the Gaussian's width (PaddleVideo: 0.9).
        min_score: the final threshold (PaddleVideo: 0.004).

    Returns:
        (float64 [R, K] each segment's score when it was kept, 0 where it was not; bool [R, K] the kept ones).
    """
    score = np.array(scores, dtype=np.float64, copy=True)
    alive = score >= min_score
    kept = np.zeros_like(score)
    kept_mask = np.zeros_like(alive)
    rows = np.arange(score.shape[0])
    start, end = segments[..., 0], segments[..., 1]
    for _ in range(score.shape[1]):
        live_rows = alive.any(axis=1)
        if not live_rows.any():
            break
        m = np.where(alive, score, -1.0).argmax(axis=1)  # [R]
        kept[rows[live_rows], m[live_rows]] = score[rows[live_rows], m[live_rows]]
        kept_mask[rows[live_rows], m[live_rows]] = True
        alive[rows, m] = False
        decay = np.exp(-np.square(_iou_with(start, end, m)) / sigma)
        score = np.where(alive & live_rows[:, None], score * decay, score)
        alive &= score >= min_score
    return kept, kept_mask


def ctcn_detections(segments: np.ndarray, probs: np.ndarray, score_thresh: float = 0.001, nms_thresh: float = 0.8,
                    soft_sigma: float = 0.9, soft_thresh: float = 0.004, pre_nms_top_k: int = 200,
                    max_per_video: int = 1000) -> np.ndarray:
    """One video's detections (PaddleVideo's decode with its thresholds), plus two caps PaddleVideo does not have.

    Per foreground class: of its ``pre_nms_top_k`` best anchors, those scoring above ``score_thresh``; hard NMS at
    ``nms_thresh``; Gaussian Soft-NMS (``soft_sigma``) dropping scores below ``soft_thresh``. Then all classes
    together, by decreasing score, at most ``max_per_video``. Why the first cap: an untrained or unsure model puts
    every class above 0.001 on every anchor (200 x 1785 candidates), whose per-class NMS alone takes seconds per
    video; a trained model's low-score tail is cut by ``max_per_video`` anyway. (The defaults are PaddleVideo's;
    configs give them in ``model.test_cfg`` and exports in deploy.yaml's ``segments.decode``.)

    Args:
        segments: float [A, 2] decoded (start, end), normalised time.
        probs: float [A, K + 1] softmax scores, background first.
        score_thresh, nms_thresh, soft_sigma, soft_thresh: PaddleVideo's ``score_thresh``, ``nms_thresh``,
            ``sigma_thresh``, ``soft_thresh``.
        pre_nms_top_k: anchors per class that may become candidates.
        max_per_video: detections returned.

    Returns:
        np.ndarray: float64 [D, 4] (start, end, score, class id in ``[0, K)``), by decreasing score (ties: the
        lower class, then the better-ranked anchor).
    """
    seg = np.asarray(segments, dtype=np.float64)
    fg = np.asarray(probs, dtype=np.float64)[:, 1:]
    k = min(int(pre_nms_top_k), fg.shape[0])
    top_anchor = np.argsort(-fg, axis=0, kind="stable")[:k]  # [k, K] best anchors of each class, best first
    top_score = np.take_along_axis(fg, top_anchor, axis=0)
    candidate = top_score > score_thresh  # a prefix of each column: the column is sorted
    classes = np.flatnonzero(candidate.any(axis=0))
    if classes.size == 0:
        return np.zeros((0, 4), dtype=np.float64)
    width = int(candidate[:, classes].sum(axis=0).max())
    valid = candidate[:width, classes].T  # [R, W] one row per class with candidates
    grid_seg = seg[top_anchor[:width, classes].T]  # [R, W, 2]
    grid_score = np.where(valid, top_score[:width, classes].T, 0.0)
    survived = nms_rows(grid_seg, valid, nms_thresh)
    kept, mask = soft_nms_rows(grid_seg, np.where(survived, grid_score, -np.inf), soft_sigma, soft_thresh)
    r, j = np.nonzero(mask)
    out = np.concatenate([grid_seg[r, j], kept[r, j, None], classes[r, None].astype(np.float64)], axis=1)
    return out[np.argsort(-out[:, 2], kind="stable")[: int(max_per_video)]]


def detections_in_seconds(detections: np.ndarray, seconds: float) -> np.ndarray:
    """Detections in normalised time -> seconds of the span the features cover: start and end clipped to [0, 1]
    first, those left empty (end <= start) dropped (``CTCN.predict``'s rule).

    Args:
        detections: float [D, 4] (start, end, score, class id).
        seconds: the span the features cover (``feature_second``, else the duration).

    Returns:
        np.ndarray: [D', 4] of ``detections``' dtype (start_s, end_s, score, class id), order kept.
    """
    dets = np.asarray(detections)
    out = dets.copy()
    out[:, :2] = np.clip(dets[:, :2], 0.0, 1.0) * seconds
    return out[out[:, 1] > out[:, 0]]


def ctcn_segments(offsets: np.ndarray, probs: np.ndarray, anchors: np.ndarray, seconds: float,
                  variances: Sequence[float], **decode: float) -> np.ndarray:
    """One video's C-TCN outputs -> its detections in seconds: :func:`decode_anchors`, :func:`ctcn_detections`
    (``decode``: its thresholds and caps, :data:`DECODE_KEYS`), :func:`detections_in_seconds`.

    Args:
        offsets: float [A, 2] the graph's ``offsets``. probs: float [A, K + 1] its ``probs`` (background first).
        anchors: float [A, 2] (centre, width). seconds: the span the features cover.
        variances: (centre, width) scales of the offsets.

    Returns:
        np.ndarray: float32 [D, 4] (start_s, end_s, score, class id) by decreasing score.

    Raises:
        ValueError: shapes that do not fit, naming them.
    """
    offsets, probs, anchors = np.asarray(offsets), np.asarray(probs), np.asarray(anchors)
    if offsets.shape != anchors.shape or anchors.ndim != 2 or anchors.shape[1] != 2 or probs.ndim != 2 \
            or probs.shape[0] != anchors.shape[0] or probs.shape[1] < 2:
        raise ValueError(f"ctcn_segments: expected offsets [A, 2], probs [A, K + 1], anchors [A, 2]; got "
                         f"{offsets.shape}, {probs.shape}, {anchors.shape}")
    dets = ctcn_detections(decode_anchors(offsets, anchors, variances), probs, **decode)
    return detections_in_seconds(dets, float(seconds)).astype(np.float32)
