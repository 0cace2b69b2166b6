"""Fitting anchor sizes to box sizes: k-means on the IoU distance, then a genetic refinement (numpy, seeded).

Why IoU and not Euclidean distance: YOLO assigns a box to the anchor of highest IoU of the (w, h) pairs aligned at
the origin, so 1 - IoU is the distance that matters, and it does not let large boxes dominate (YOLOv2's paper;
PaddleDetection's ``YOLOv2AnchorCluster``). k-means settles in a local optimum of its own objective (mean
distance to the centre), not of the mean best IoU over all anchors; the genetic step (ultralytics'
``kmean_anchors``: multiply the anchors by random factors, keep the mutation when the fitness improves) then
climbs the fitness itself. Fitness here is the mean best IoU, the number the tool reports.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BPR_IOU = 0.25  # a box counts as "recalled" when its best anchor IoU is above this (PaddleDetection's threshold)
MIN_SIDE = 2.0  # boxes with a side below this many pixels are left out of the fit (ultralytics' rule)
# larger sets (COCO: 860k boxes) are fitted on a seeded sample; the result is scored on every box
KMEANS_MAX_BOXES = 100_000
EVOLVE_MAX_BOXES = 20_000


def wh_iou(wh: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    """IoU of every box with every anchor, both aligned at the origin.

    Args:
        wh: float [M, 2] box widths and heights (> 0).
        anchors: float [K, 2] anchor widths and heights (> 0), or [P, K, 2] for P anchor sets at once.

    Returns:
        float64 [M, K] (or [P, M, K]). Widths and heights are taken apart first: numpy's reductions over a
        last axis of 2 are several times slower than two element-wise products.
    """
    wh = np.asarray(wh, dtype=np.float64)
    anchors = np.asarray(anchors, dtype=np.float64)
    w, h = wh[:, 0, None], wh[:, 1, None]  # [M, 1]
    aw, ah = anchors[..., None, :, 0], anchors[..., None, :, 1]  # [(P,) 1, K]
    inter = np.minimum(w, aw) * np.minimum(h, ah)  # [(P,) M, K]
    return inter / (w * h + aw * ah - inter)


def best_iou(wh: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    """Each box's IoU with its best anchor: float64 [M] (or [P, M] for [P, K, 2] anchors)."""
    return wh_iou(wh, anchors).max(-1)


@dataclass(frozen=True)
class AnchorFit:
    """How well anchors fit the boxes.

    Attributes:
        mean_iou: mean over boxes of the best anchor IoU (0..1; what the fit maximises).
        bpr: best possible recall: the fraction of boxes whose best anchor IoU is above :data:`BPR_IOU`.
    """

    mean_iou: float
    bpr: float


def anchor_fit(wh: np.ndarray, anchors: np.ndarray) -> AnchorFit:
    """:class:`AnchorFit` of ``anchors`` [K, 2] on boxes ``wh`` [M, 2]."""
    best = best_iou(wh, anchors)
    return AnchorFit(float(best.mean()), float((best > BPR_IOU).mean()))


def _kmeans_pp_init(wh: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++ seeding with the distance 1 - IoU: each next centre is a box drawn with probability
    proportional to its squared distance to the nearest centre chosen so far."""
    centres = [wh[rng.integers(len(wh))]]
    for _ in range(1, k):
        d = 1.0 - best_iou(wh, np.array(centres))
        p = d * d
        total = p.sum()
        centres.append(wh[rng.integers(len(wh))] if total <= 0 else wh[rng.choice(len(wh), p=p / total)])
    return np.array(centres, dtype=np.float64)


def kmeans_iou(wh: np.ndarray, k: int, seed: int = 0, max_iter: int = 300) -> np.ndarray:
    """k-means of box sizes with the distance 1 - IoU (Lloyd's iterations, centres are the members' means).

    Args:
        wh: float [M, 2] box sizes (M >= k; repeated sizes are fine).
        k: number of anchors.
        seed: the generator's seed (k-means++ seeding).
        max_iter: stop after this many iterations when assignments keep changing.

    Returns:
        float64 [k, 2] centres sorted by area. A cluster left empty takes the box farthest from every centre.
    """
    wh = np.asarray(wh, dtype=np.float64)
    rng = np.random.default_rng(seed)
    centres = _kmeans_pp_init(wh, k, rng)
    assign = None
    for _ in range(max_iter):
        iou = wh_iou(wh, centres)
        new = iou.argmax(1)
        if assign is not None and np.array_equal(new, assign):
            break
        assign = new
        for j in range(k):
            members = wh[assign == j]
            if len(members):
                centres[j] = members.mean(0)
            else:  # reseed with the worst-fitted box
                centres[j] = wh[iou.max(1).argmin()]
    return centres[np.argsort(centres.prod(1), kind='stable')]


def evolve(wh: np.ndarray, anchors: np.ndarray, iters: int = 1000, seed: int = 0, population: int = 4,
           mutation_prob: float = 0.9, sigma: float = 0.1) -> np.ndarray:
    """Genetic refinement (ultralytics' ``kmean_anchors``): per generation ``population`` mutants of the best
    anchors so far, each anchor side multiplied by ``1 + N(0, sigma * u)`` (u ~ U(0, 1) per mutant) with
    probability ``mutation_prob``, factors clipped to 0.3..3 and sides to >= :data:`MIN_SIDE`; the best mutant
    replaces the anchors when its mean best IoU is higher. Mutants are scored together (one [P, M, K] IoU).

    Args:
        wh: float [M, 2] box sizes.
        anchors: float [K, 2] the start (k-means' centres).
        iters: generations.
        seed: the generator's seed.
        population: mutants per generation.
        mutation_prob: chance that a side is mutated.
        sigma: the mutation's scale.

    Returns:
        float64 [K, 2], sorted by area, with a mean best IoU >= that of ``anchors``.
    """
    wh = np.asarray(wh, dtype=np.float64)
    best = np.asarray(anchors, dtype=np.float64).copy()
    fitness = best_iou(wh, best).mean()
    rng = np.random.default_rng(seed)
    chunk = max(1, int(2e7 // max(1, len(wh) * len(best))))  # keep one [P, M, K] block near 160 MB at most
    for _ in range(iters):
        scale = rng.random((population, 1, 1)) * sigma
        mutate = rng.random((population, *best.shape)) < mutation_prob
        factors = np.clip(1.0 + mutate * scale * rng.standard_normal((population, *best.shape)), 0.3, 3.0)
        mutants = np.maximum(best[None] * factors, MIN_SIDE)
        scores = np.concatenate([best_iou(wh, mutants[i:i + chunk]).mean(-1) for i in range(0, population, chunk)])
        i = int(scores.argmax())
        if scores[i] > fitness:
            fitness, best = scores[i], mutants[i]
    return best[np.argsort(best.prod(1), kind='stable')]


def fit_anchors(wh: np.ndarray, k: int, iters: int = 1000, seed: int = 0, start: np.ndarray | None = None,
                restarts: int = 3) -> np.ndarray:
    """Anchors for boxes ``wh``: the best of ``restarts`` :func:`kmeans_iou` runs (seeds ``seed``,
    ``seed + 1``, ...), then :func:`evolve` from the better (mean best IoU) of those centres and ``start`` (the
    config's anchors, when there are ``k`` of them), so the result never fits worse than either. k-means runs on
    a seeded sample of at most :data:`KMEANS_MAX_BOXES` boxes and the genetic step scores at most
    :data:`EVOLVE_MAX_BOXES` (its result is kept only when it is better on every box). Rounding to whole pixels
    is left to the caller.

    Args:
        wh: float [M, 2] box sizes in training-input pixels (M >= 1).
        k: number of anchors.
        iters: genetic generations (0: k-means only).
        seed: seed of both steps.
        start: float [k, 2] anchors to compete with k-means' centres, or None.
        restarts: k-means runs (>= 1).

    Returns:
        float64 [k, 2] sorted by area.
    """
    wh = np.asarray(wh, dtype=np.float64)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(wh))
    sample = wh[order[:KMEANS_MAX_BOXES]]
    runs = [kmeans_iou(sample, min(k, len(np.unique(sample, axis=0))), seed=seed + i) for i in range(restarts)]
    centres = max(runs, key=lambda c: best_iou(sample, c).mean())  # k-means' optimum depends on its seeding
    if len(centres) < k:  # fewer distinct sizes than anchors: repeat the largest
        centres = np.concatenate([centres, np.repeat(centres[-1:], k - len(centres), 0)])
    if start is not None and len(start) == k and best_iou(wh, start).mean() > best_iou(wh, centres).mean():
        centres = np.asarray(start, dtype=np.float64)
    if iters <= 0:
        return centres
    evolved = evolve(wh[order[:EVOLVE_MAX_BOXES]], centres, iters=iters, seed=seed)
    return evolved if best_iou(wh, evolved).mean() >= best_iou(wh, centres).mean() else centres
