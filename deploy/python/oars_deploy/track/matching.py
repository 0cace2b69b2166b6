"""Association of tracks with detections: IoU costs and a minimum-cost assignment with a cost limit (numpy).

Why an assignment of our own: the runtime depends on numpy, OpenCV, PyYAML and ONNX Runtime only
(deploy/python/pyproject.toml); scipy's ``linear_sum_assignment`` or ``lap`` would add a dependency for a problem
of a few dozen rows per frame. :func:`min_cost_assignment` is the Hungarian method with potentials and shortest
augmenting paths (the O(n^3) form of Jonker-Volgenant / Kuhn-Munkres), its inner loop over columns vectorised.
:func:`linear_assignment` adds what tracking needs: a pair may be left unmatched, at ``cost_limit / 2`` per side
(the problem ``lap.lapjv(..., extend_cost=True, cost_limit=...)`` solves, which ByteTrack uses), so no pair
costing more than ``cost_limit`` is ever matched and the total over matched pairs plus unmatched sides is minimal.
"""

from __future__ import annotations

import numpy as np


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pairwise IoU of xyxy boxes.

    Args:
        a: float [N, 4]. b: float [M, 4] (x1, y1, x2, y2; an empty or inverted box has area 0).

    Returns:
        float64 [N, M] in [0, 1] (0 where a union is empty).
    """
    a = np.asarray(a, dtype=np.float64).reshape(-1, 4)
    b = np.asarray(b, dtype=np.float64).reshape(-1, 4)
    area_a = np.clip(a[:, 2] - a[:, 0], 0, None) * np.clip(a[:, 3] - a[:, 1], 0, None)
    area_b = np.clip(b[:, 2] - b[:, 0], 0, None) * np.clip(b[:, 3] - b[:, 1], 0, None)
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    wh = np.clip(rb - lt, 0, None)
    inter = wh[..., 0] * wh[..., 1]
    union = area_a[:, None] + area_b[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def min_cost_assignment(cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A complete minimum-cost assignment of the rows of ``cost`` to distinct columns (rows <= columns).

    Args:
        cost: float [N, M], N <= M, finite (use a large value, not inf, for forbidden pairs).

    Returns:
        (rows int64 [N], cols int64 [N]): row ``rows[k]`` goes to column ``cols[k]``; rows ascending.
    """
    cost = np.asarray(cost, dtype=np.float64)
    n, m = cost.shape
    if n > m:
        raise ValueError(f"min_cost_assignment: {n} rows > {m} columns (transpose the matrix)")
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    # 1-based as the classic formulation: column 0 is a virtual start, p[j] the row matched to column j (0: none)
    u = np.zeros(n + 1)
    v = np.zeros(m + 1)
    p = np.zeros(m + 1, dtype=np.int64)
    way = np.zeros(m + 1, dtype=np.int64)
    for i in range(1, n + 1):
        p[0] = i
        j0 = 0
        minv = np.full(m + 1, np.inf)
        used = np.zeros(m + 1, dtype=bool)
        while True:  # grow a shortest-path tree until it reaches a free column
            used[j0] = True
            i0 = p[j0]
            reduced = cost[i0 - 1] - u[i0] - v[1:]
            free = ~used[1:]
            better = free & (reduced < minv[1:])
            minv[1:][better] = reduced[better]
            way[1:][better] = j0
            candidates = np.where(free, minv[1:], np.inf)
            j1 = int(np.argmin(candidates)) + 1
            delta = candidates[j1 - 1]
            u[p[used]] += delta
            v[used] -= delta
            minv[~used] -= delta
            j0 = j1
            if p[j0] == 0:
                break
        while j0:  # flip the path's matches back to the start
            j1 = way[j0]
            p[j0] = p[j1]
            j0 = j1
    cols = np.flatnonzero(p[1:]) + 1
    rows = p[cols] - 1
    order = np.argsort(rows)
    return rows[order].astype(np.int64), (cols[order] - 1).astype(np.int64)


def linear_assignment(cost: np.ndarray, cost_limit: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Match rows to columns at minimum cost where leaving a row or a column unmatched costs ``cost_limit / 2``.

    Matching a pair instead of leaving both unmatched changes the total by ``cost - cost_limit``, so the problem is
    a complete assignment on ``min(cost - cost_limit, 0)`` (0: "unmatched"), solved on the rows and columns that
    have at least one pair within the limit (the others are unmatched whatever happens): the same optimum as
    ``lap.lapjv``'s extended square matrix of size N + M, on a matrix that is usually far smaller.

    Args:
        cost: float [N, M] (e.g. 1 - IoU of tracks x detections; NaN / inf: never).
        cost_limit: the most a matched pair may cost (ByteTrack's ``match_thresh``).

    Returns:
        (matches int64 [K, 2] of (row, col) with ``cost[row, col] <= cost_limit``, rows ascending;
        unmatched rows int64 [N - K]; unmatched columns int64 [M - K]), all ascending.
    """
    cost = np.asarray(cost, dtype=np.float64)
    n, m = cost.shape
    feasible = np.isfinite(cost) & (cost <= cost_limit)
    rows = np.flatnonzero(feasible.any(axis=1))
    cols = np.flatnonzero(feasible.any(axis=0))
    matches = np.zeros((0, 2), np.int64)
    if len(rows) and len(cols):
        gain = np.where(feasible, cost - cost_limit, 0.0)[np.ix_(rows, cols)]  # <= 0; 0 = leave unmatched
        if len(rows) <= len(cols):
            r, c = min_cost_assignment(gain)
        else:
            c, r = min_cost_assignment(gain.T)
        pairs = np.stack([rows[r], cols[c]], axis=1)
        matches = pairs[feasible[pairs[:, 0], pairs[:, 1]]]
        matches = matches[np.argsort(matches[:, 0], kind="stable")].astype(np.int64)
    unmatched_rows = np.setdiff1d(np.arange(n), matches[:, 0]).astype(np.int64)
    unmatched_cols = np.setdiff1d(np.arange(m), matches[:, 1]).astype(np.int64)
    return matches, unmatched_rows, unmatched_cols
