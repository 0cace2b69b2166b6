"""Fitting the ``scales x ratios`` anchors of RetinaNet / RPN / SSD-style heads to box sizes (numpy, deterministic).

Such anchors are a product: every level holds every ratio at every scale, so the two factors are fitted apart, each
by a one-dimensional k-means in the space where the anchors are evenly spread:

- aspect ratios (h / w) on ``log(h / w)``: a ratio r and 1 / r are equally far from a square there, which they
  are for IoU too (MMDetection's and PaddleDetection's anchor tools cluster sizes, not this product; the log keeps
  tall and wide boxes symmetric). SSD's ratios come in pairs (r and 1 / r) next to the squares, so it clusters
  ``|log(h / w)|`` with one centre held at 0 (the squares every level has).
- scales on the fractional octave of ``log2(box size / level reference)``: levels are one octave apart (strides 8,
  16, ...), so a box is handled by its best level and only its position inside that level's octave matters; the
  k scales of a level sit at k points of that octave.

One-dimensional k-means starts from the data's quantiles, so there is no seed and the same boxes give the same
anchors.
"""

from __future__ import annotations

import numpy as np

KMEANS_MAX_ITER = 100


def kmeans_1d(values: np.ndarray, k: int, fixed: tuple[float, ...] = (), max_iter: int = KMEANS_MAX_ITER
              ) -> np.ndarray:
    """Lloyd's k-means of scalars, with optional centres that take part in the assignment but never move.

    Args:
        values: float [M] (M >= 1).
        k: free centres (>= 1).
        fixed: centres held in place (SSD's squares: 0 in ``|log(h / w)|``); a value nearest to one of them
            does not pull any free centre.
        max_iter: stop after this many iterations when assignments keep changing.

    Returns:
        float64 [k] free centres, ascending. With F fixed centres they start at the (j + 0.5 + F) / (k + F)
        quantiles (the fixed ones are taken to serve the lowest values, as SSD's 0 does); a centre left without
        members keeps its place.
    """
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    pinned = np.asarray(fixed, dtype=np.float64).reshape(-1)
    n_fixed = len(pinned)  # the pinned centres are taken to serve the lowest quantiles (SSD: the squares' 0)
    centres = np.quantile(x, (np.arange(k) + 0.5 + n_fixed) / (k + n_fixed))
    assign = None
    for _ in range(max_iter):
        everything = np.concatenate([centres, pinned])
        new = np.abs(x[:, None] - everything[None]).argmin(1)  # [M]: index into free centres, then fixed ones
        if assign is not None and np.array_equal(new, assign):
            break
        assign = new
        counts = np.bincount(new, minlength=len(everything))[:k]
        sums = np.bincount(new, weights=x, minlength=len(everything))[:k]
        centres = np.where(counts > 0, sums / np.maximum(counts, 1), centres)
    return np.sort(centres)


def fit_ratios(wh: np.ndarray, k: int) -> np.ndarray:
    """``k`` aspect ratios h / w for boxes ``wh``: k-means on ``log(h / w)``.

    Args:
        wh: float [M, 2] box widths and heights (> 0).
        k: ratios to fit (the config's count: the head's channels depend on it).

    Returns:
        float64 [k] ratios h / w, ascending.
    """
    wh = np.asarray(wh, dtype=np.float64)
    return np.exp(kmeans_1d(np.log(wh[:, 1] / wh[:, 0]), k))


def fit_paired_ratios(wh: np.ndarray, k: int) -> np.ndarray:
    """``k`` SSD aspect ratios ``r >= 1`` (each gives an r-tall and an r-wide box beside the level's squares):
    k-means on ``|log(h / w)|`` with one more centre fixed at 0.

    Args:
        wh: float [M, 2] box widths and heights (> 0).
        k: ratios to fit.

    Returns:
        float64 [k] ratios >= 1, ascending.
    """
    wh = np.asarray(wh, dtype=np.float64)
    return np.exp(np.maximum(kmeans_1d(np.abs(np.log(wh[:, 1] / wh[:, 0])), k, fixed=(0.0,)), 0.0))


def octave_positions(sizes: np.ndarray, refs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each box's best level and its position inside that level's octave.

    Level ``l`` covers the sizes ``refs[l] * 2 ** [0, 1)``; a box's best level is the one whose octave holds its
    size, or the nearest one (in octaves) for sizes below the first or above the last.

    Args:
        sizes: float [M] box sizes ``sqrt(w * h)`` (the size an anchor of any ratio has at its scale).
        refs: float [L] each level's reference size (its smallest anchor size).

    Returns:
        (level int64 [M], position float64 [M] in [0, 1]: ``log2(size / refs[level])`` clipped, so a box smaller
        than every anchor pulls the smallest scale down and a box too large pulls the largest up).
    """
    u = np.log2(np.asarray(sizes, dtype=np.float64)[:, None] / np.asarray(refs, dtype=np.float64)[None])  # [M, L]
    outside = np.maximum(-u, 0.0) + np.maximum(u - 1.0, 0.0)
    level = outside.argmin(1)
    return level, np.clip(u[np.arange(len(u)), level], 0.0, 1.0)


def fit_octave_scales(wh: np.ndarray, refs: np.ndarray, k: int) -> np.ndarray:
    """``k`` positions inside the octave for boxes ``wh`` on levels with reference sizes ``refs``.

    Args:
        wh: float [M, 2] box widths and heights (> 0).
        refs: float [L] each level's reference size in pixels.
        k: scales per level.

    Returns:
        float64 [k] ascending positions p in [0, 1]: the level-l anchors become ``refs[l] * 2 ** p``.
    """
    wh = np.asarray(wh, dtype=np.float64)
    _, position = octave_positions(np.sqrt(wh.prod(1)), refs)
    return kmeans_1d(position, k)
