"""Soft-NMS (Bodla et al., ICCV 2017) without torch: one implementation for intervals ``[N, 2]`` and boxes
``[N, 4]`` (any number of axes: the overlap is the product of the per-axis overlaps), Gaussian or linear decay.

Why here: the predictors must not import torch, and the PyTorch models call this same function on their
candidates, so that training-side evaluation and the deployed predictors cannot disagree.

The rule, one step per kept candidate, every step vectorised over the remaining ones: keep the remaining
candidate ``m`` with the highest current score (ties: the lowest index); every other remaining candidate ``i``
(of the same label, when labels are given) whose IoU with ``m`` exceeds ``iou_threshold`` is decayed::

    gaussian: score_i *= exp(-iou(i, m) ** 2 / sigma)
    linear:   score_i *= 1 - iou(i, m)

then the remaining candidates whose score fell below ``min_score`` are dropped. A kept candidate keeps the score
it had when it was picked, so kept scores never increase.
"""

from __future__ import annotations

import numpy as np

from oars_deploy.errors import DeployError
from oars_deploy.nms import select_candidates

METHODS = ("gaussian", "linear")
SETTINGS = ("method", "sigma", "iou_threshold", "min_score")


def soft_nms_settings(section: object, where: str) -> dict:
    """A deploy.yaml ``nms: {type: soft_nms, method, sigma, iou_threshold, min_score}`` section as keyword
    arguments of :func:`multiclass_soft_nms`.

    Raises:
        DeployError: not that shape, an unknown method, or a number out of range, naming ``where``.
    """
    expected = "{type: soft_nms, method: gaussian | linear, sigma: 0.5, iou_threshold: 0.3, min_score: 0.001}"
    if not isinstance(section, dict) or section.get("type") != "soft_nms" or set(section) != {"type", *SETTINGS}:
        raise DeployError(f"{where} must be {expected}, got {section!r}")
    out = {k: section[k] for k in SETTINGS}
    try:
        out.update(sigma=float(out["sigma"]), iou_threshold=float(out["iou_threshold"]),
                   min_score=float(out["min_score"]))
    except (TypeError, ValueError):
        raise DeployError(f"{where}: sigma, iou_threshold and min_score must be numbers, got {section!r}") from None
    if out["method"] not in METHODS or not out["sigma"] > 0 or not 0 <= out["iou_threshold"] < 1 \
            or not 0 <= out["min_score"] < 1:
        raise DeployError(f"{where}: method must be one of {list(METHODS)}, sigma > 0, iou_threshold and min_score "
                          f"in [0, 1); got {section!r}")
    return out


def _check(coords: np.ndarray, scores: np.ndarray, method: str, sigma: float, labels: np.ndarray | None) -> None:
    if coords.ndim != 2 or coords.shape[1] not in (2, 4):
        raise ValueError(f"soft_nms: coordinates must be [N, 2] (start, end) or [N, 4] (x1, y1, x2, y2), got "
                         f"{tuple(coords.shape)}")
    if scores.shape != (coords.shape[0],):
        raise ValueError(f"soft_nms: scores must be [N] with N = {coords.shape[0]}, got {tuple(scores.shape)}")
    if labels is not None and np.shape(labels) != (coords.shape[0],):
        raise ValueError(f"soft_nms: labels must be [N] with N = {coords.shape[0]}, got {np.shape(labels)}")
    if method not in METHODS:
        raise ValueError(f"soft_nms: method={method!r} is not supported; accepted: {list(METHODS)}")
    if method == "gaussian" and not sigma > 0:
        raise ValueError(f"soft_nms: sigma must be > 0 for the Gaussian decay, got {sigma!r}")


def soft_nms(coords: np.ndarray, scores: np.ndarray, method: str = "gaussian", sigma: float = 0.5,
             iou_threshold: float | np.ndarray = 0.0, min_score: float | None = None, max_keep: int | None = None,
             labels: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Soft-NMS of ``N`` candidates (the rule is in the module docstring).

    Args:
        coords: float ``[N, 2 * D]``: the lower corner's ``D`` coordinates, then the upper corner's (intervals
            ``start, end``; boxes ``x1, y1, x2, y2``).
        scores: float ``[N]``.
        method: ``'gaussian'`` or ``'linear'``.
        sigma: the Gaussian's width (read by ``'gaussian'`` only).
        iou_threshold: candidates overlapping the kept one by more than this are decayed: one float, or
            ``[N]`` (the threshold that applies when candidate ``j`` is the kept one, e.g. BMN's threshold that
            grows with the kept proposal's width). 0 decays every overlapping candidate (Bodla's Gaussian).
        min_score: candidates whose decayed score is below it are dropped (None: none are dropped).
        max_keep: stop after this many picks (None: until none remain).
        labels: int ``[N]``: candidates of different labels never decay each other (per-class soft-NMS in one
            pass); None: one class.

    Returns:
        ``(keep, kept_scores)``: int64 ``[K]`` indices into the input in pick order and their scores when picked
        (the input's float dtype, at least float32; non-increasing).

    Raises:
        ValueError: a bad shape, method or sigma.
    """
    coords, scores = np.asarray(coords), np.asarray(scores)
    _check(coords, scores, method, sigma, labels)
    dtype = np.result_type(coords.dtype, scores.dtype, np.float32)
    d = coords.shape[1] // 2
    lo = [coords[:, a].astype(dtype) for a in range(d)]
    hi = [coords[:, d + a].astype(dtype) for a in range(d)]
    volume = hi[0] - lo[0]
    for a in range(1, d):
        volume = volume * (hi[a] - lo[a])
    score = scores.astype(dtype)  # a copy: decayed below
    threshold = np.broadcast_to(np.asarray(iou_threshold), score.shape)
    same_label = None if labels is None else np.asarray(labels)
    alive = np.ones(score.shape, dtype=bool)
    limit = score.shape[0] if max_keep is None else min(int(max_keep), score.shape[0])
    keep_idx: list[int] = []
    keep_score: list = []
    while len(keep_idx) < limit and alive.any():
        m = int(np.where(alive, score, -np.inf).argmax())
        keep_idx.append(m)
        keep_score.append(score[m])
        alive[m] = False
        inter = np.maximum(np.minimum(hi[0], hi[0][m]) - np.maximum(lo[0], lo[0][m]), 0)
        for a in range(1, d):
            inter = inter * np.maximum(np.minimum(hi[a], hi[a][m]) - np.maximum(lo[a], lo[a][m]), 0)
        union = volume + volume[m] - inter
        iou = inter / np.maximum(union, dtype.type(1e-12))
        decay = alive & (iou > threshold[m])
        if same_label is not None:
            decay &= same_label == same_label[m]
        weight = np.exp(-np.square(iou) / sigma) if method == "gaussian" else 1 - iou
        score = np.where(decay, score * weight, score).astype(dtype, copy=False)
        if min_score is not None:
            alive &= score >= min_score
    return np.asarray(keep_idx, dtype=np.int64), np.asarray(keep_score, dtype=dtype).reshape(-1)


def multiclass_soft_nms(boxes: np.ndarray, scores: np.ndarray, score_thr: float, method: str, sigma: float,
                        iou_threshold: float, min_score: float, max_per_img: int | None = 100,
                        nms_pre: int | None = 1000) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One image's per-class soft-NMS: the candidates of :func:`oars_deploy.nms.multiclass_nms` (pairs with
    score > ``score_thr``, the ``nms_pre`` best), :func:`soft_nms` per class, the ``max_per_img`` best.

    Args:
        boxes: ``[N, 4]`` (shared by the classes) or ``[N, C, 4]`` (one box per class) xyxy.
        scores: ``[N, C]``.
        score_thr, nms_pre, max_per_img: as :func:`oars_deploy.nms.multiclass_nms` (None or <= 0: no limit).
        method, sigma, iou_threshold, min_score: as :func:`soft_nms`.

    Returns:
        ``(boxes [K, 4] float32, decayed scores [K] float32, labels [K] int64)`` by decreasing score.
    """
    cand_boxes, cand_scores, labels = select_candidates(boxes, scores, score_thr, nms_pre)
    limit = max_per_img if max_per_img is not None and max_per_img > 0 else None
    keep, kept = soft_nms(cand_boxes, cand_scores, method, sigma, iou_threshold, min_score, limit, labels)
    return cand_boxes[keep].reshape(-1, 4), kept.astype(np.float32), labels[keep].astype(np.int64)
