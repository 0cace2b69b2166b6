"""A constant-velocity Kalman filter over boxes in (cx, cy, a, h), vectorised over tracks (numpy, torch-free).

The motion model of SORT / DeepSORT that ByteTrack (Zhang et al. 2022) keeps: the state of a track is
``[cx, cy, a, h, vcx, vcy, va, vh]`` (box centre, aspect ratio w / h, height and their velocities per frame); a
step moves each position by its velocity (F = [[I, I], [0, I]]) and the measurement is the position part
(H = [I, 0]). The noise scales with the box height, so a large box may move more pixels per frame than a small one:
process noise std ``w_pos * h`` for the positions and ``w_vel * h`` for the velocities, the aspect ratio held
nearly fixed (1e-2 / 1e-5), measurement noise std ``w_pos * h`` (1e-1 for the aspect ratio).

Why vectorised: every frame predicts all live tracks at once ([N, 8] means, [N, 8, 8] covariances, one batched
matrix product) instead of a Python loop per track.
"""

from __future__ import annotations

import numpy as np

NDIM = 4  # measured: cx, cy, a, h


class KalmanBoxFilter:
    """Kalman filter of box tracks: :meth:`initiate`, :meth:`predict`, :meth:`project`, :meth:`update`.

    Args:
        std_weight_position: position noise per pixel of box height (1/20, as SORT's and ByteTrack's filter).
        std_weight_velocity: velocity noise per pixel of box height (1/160).
        dt: frames per step (1: one predicted frame).
    """

    def __init__(self, std_weight_position: float = 1.0 / 20, std_weight_velocity: float = 1.0 / 160,
                 dt: float = 1.0) -> None:
        self.w_pos = float(std_weight_position)
        self.w_vel = float(std_weight_velocity)
        self.motion = np.eye(2 * NDIM)
        self.motion[:NDIM, NDIM:] = dt * np.eye(NDIM)
        self.observe = np.eye(NDIM, 2 * NDIM)

    def initiate(self, measurement: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """New tracks from unassociated boxes: the position measured, the velocity 0 with a wide uncertainty.

        Args:
            measurement: float [N, 4] boxes as (cx, cy, a, h).

        Returns:
            (mean float64 [N, 8], covariance float64 [N, 8, 8]).
        """
        z = np.asarray(measurement, dtype=np.float64).reshape(-1, NDIM)
        mean = np.concatenate([z, np.zeros_like(z)], axis=1)
        h = z[:, 3]
        std = np.stack([2 * self.w_pos * h, 2 * self.w_pos * h, np.full_like(h, 1e-2), 2 * self.w_pos * h,
                        10 * self.w_vel * h, 10 * self.w_vel * h, np.full_like(h, 1e-5), 10 * self.w_vel * h], axis=1)
        return mean, _diag(std ** 2)

    def predict(self, mean: np.ndarray, covariance: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One step ahead for every track: x' = F x, P' = F P F^T + Q (Q from each track's height before the step).

        Args:
            mean: float [N, 8]. covariance: float [N, 8, 8].

        Returns:
            (mean [N, 8], covariance [N, 8, 8]), new arrays.
        """
        mean = np.asarray(mean, dtype=np.float64).reshape(-1, 2 * NDIM)
        h = mean[:, 3]
        std = np.stack([self.w_pos * h, self.w_pos * h, np.full_like(h, 1e-2), self.w_pos * h,
                        self.w_vel * h, self.w_vel * h, np.full_like(h, 1e-5), self.w_vel * h], axis=1)
        new_mean = mean @ self.motion.T
        new_cov = self.motion @ covariance @ self.motion.T + _diag(std ** 2)
        return new_mean, new_cov

    def project(self, mean: np.ndarray, covariance: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The state in measurement space: (H x, H P H^T + R).

        Returns:
            (float [N, 4], float [N, 4, 4]).
        """
        h = mean[:, 3]
        std = np.stack([self.w_pos * h, self.w_pos * h, np.full_like(h, 1e-1), self.w_pos * h], axis=1)
        return mean[:, :NDIM].copy(), covariance[:, :NDIM, :NDIM] + _diag(std ** 2)

    def update(self, mean: np.ndarray, covariance: np.ndarray,
               measurement: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Correct every track with its associated box: K = P H^T S^-1, x' = x + K (z - H x), P' = P - K S K^T.

        Args:
            mean: float [N, 8]. covariance: float [N, 8, 8]. measurement: float [N, 4] (cx, cy, a, h), row i the
                box associated with track i.

        Returns:
            (mean [N, 8], covariance [N, 8, 8]), new arrays.
        """
        z = np.asarray(measurement, dtype=np.float64).reshape(-1, NDIM)
        proj_mean, proj_cov = self.project(mean, covariance)
        cross = covariance[:, :, :NDIM]  # P H^T: [N, 8, 4]
        # K^T = S^-1 (P H^T)^T (S symmetric positive definite): one batched solve instead of an inverse
        gain = np.linalg.solve(proj_cov, cross.transpose(0, 2, 1)).transpose(0, 2, 1)  # [N, 8, 4]
        new_mean = mean + np.einsum("nij,nj->ni", gain, z - proj_mean)
        new_cov = covariance - gain @ proj_cov @ gain.transpose(0, 2, 1)
        return new_mean, new_cov


def _diag(values: np.ndarray) -> np.ndarray:
    """float [N, D] -> [N, D, D] diagonal matrices."""
    out = np.zeros(values.shape + (values.shape[-1],), dtype=np.float64)
    idx = np.arange(values.shape[-1])
    out[:, idx, idx] = values
    return out


def xyxy_to_xyah(boxes: np.ndarray) -> np.ndarray:
    """float [N, 4] (x1, y1, x2, y2) -> float64 [N, 4] (cx, cy, w / h, h); a zero height is taken as 1e-6."""
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    w, h = b[:, 2] - b[:, 0], np.maximum(b[:, 3] - b[:, 1], 1e-6)
    return np.stack([b[:, 0] + w / 2, b[:, 1] + h / 2, w / h, h], axis=1)


def xyah_to_xyxy(xyah: np.ndarray) -> np.ndarray:
    """float [N, >=4] whose first four columns are (cx, cy, a, h) -> float64 [N, 4] (x1, y1, x2, y2)."""
    s = np.asarray(xyah, dtype=np.float64).reshape(len(xyah), -1)
    w, h = s[:, 2] * s[:, 3], s[:, 3]
    return np.stack([s[:, 0] - w / 2, s[:, 1] - h / 2, s[:, 0] + w / 2, s[:, 1] + h / 2], axis=1)
