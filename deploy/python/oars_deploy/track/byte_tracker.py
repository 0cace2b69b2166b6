"""ByteTrack (Zhang et al. 2022, "ByteTrack: Multi-Object Tracking by Associating Every Detection Box"), numpy only.

Each frame, after every live track is moved one step by the Kalman filter (:mod:`oars_deploy.track.kalman`):

1. high-score detections (>= ``track_thresh``) are matched to the tracked and lost tracks by IoU (weighed by the
   detection score), at most ``match_thresh`` apart (:func:`oars_deploy.track.matching.linear_assignment`);
2. the low-score detections (``low_thresh`` < score < ``track_thresh``: often an occluded object) are matched to
   the tracks still unmatched that were tracked in the previous frame, by IoU alone; tracked tracks left without a
   detection become lost;
3. tracks born in the previous frame (unconfirmed) are matched to the remaining high detections; a match
   confirms them, the others are dropped;
4. a remaining high detection scoring >= ``track_thresh + new_track_margin`` starts an unconfirmed track
   (confirmed at once in the first frame);
5. a lost track not seen for ``max_time_lost`` frames is removed; a tracked and a lost track that overlap nearly
   completely are one object: the younger one goes.

Ids are given when a track is confirmed, counted per tracker from 1, and never reused (an id stays with its track
while it is lost; a removed track's id is never handed out again). Association is class-agnostic, as ByteTrack's;
a track takes the label of its latest detection.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from oars_deploy.track.kalman import KalmanBoxFilter, xyah_to_xyxy, xyxy_to_xyah
from oars_deploy.track.matching import box_iou, linear_assignment
from oars_deploy.track.options import TrackerConfig

TRACKED, LOST, REMOVED = "tracked", "lost", "removed"


@dataclass(eq=False)
class Track:
    """One object over time.

    Attributes:
        mean: float64 [8] Kalman state (cx, cy, a, h and velocities). covariance: float64 [8, 8].
        state: ``'tracked'`` (seen in the latest frame), ``'lost'`` or ``'removed'``.
        track_id: 0 until confirmed, then the id. confirmed: matched in a second frame (or born in the first).
        start_frame: frame it was born in. last_frame: frame of its latest detection. score, label: of that
            detection. hits: frames it was matched in.
    """

    mean: np.ndarray
    covariance: np.ndarray
    start_frame: int
    last_frame: int
    score: float
    label: int
    state: str = TRACKED
    track_id: int = 0
    confirmed: bool = False
    hits: int = 1

    @property
    def box(self) -> np.ndarray:
        """The filter's current box, float64 [4] xyxy."""
        return xyah_to_xyxy(self.mean[None])[0]


def track_boxes(tracks: list[Track]) -> np.ndarray:
    """The filters' current boxes of ``tracks``: float64 [N, 4] xyxy (one conversion for all)."""
    return xyah_to_xyxy(np.stack([t.mean for t in tracks])) if tracks else np.zeros((0, 4))


class ByteTracker:
    """Multi-object tracking by associating every detection box (see the module docstring).

    Args:
        config: the thresholds (:class:`TrackerConfig`).
        frame_rate: frames per second of the frames :meth:`update` is given (with ``config.track_buffer``, how
            long a lost track is kept); ``config.frame_rate`` wins when set.
    """

    def __init__(self, config: TrackerConfig | None = None, frame_rate: float = 30.0) -> None:
        self.config = config or TrackerConfig()
        rate = self.config.frame_rate or frame_rate or self.config.base_frame_rate
        self.max_time_lost = self.config.max_time_lost(rate)
        self.kalman = KalmanBoxFilter()
        self.tracks: list[Track] = []  # tracked and lost; removed ones are dropped
        self.frame_id = 0
        self._next_id = 1

    def update(self, boxes: np.ndarray, scores: np.ndarray, labels: np.ndarray | None = None) -> np.ndarray:
        """Advance one frame with its detections.

        Args:
            boxes: float [N, 4] xyxy in pixels. scores: float [N]. labels: int [N] (or None: all 0).

        Returns:
            int64 [N]: the id of the confirmed track each detection was associated with, -1 for none (too low a
            score, no track, or a track not yet confirmed).
        """
        cfg = self.config
        self.frame_id += 1
        boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
        scores = np.asarray(scores, dtype=np.float64).reshape(-1)
        labels = np.zeros(len(boxes), np.int64) if labels is None else np.asarray(labels, np.int64).reshape(-1)
        if not (len(scores) == len(boxes) == len(labels)):
            raise ValueError(f"ByteTracker.update: {len(boxes)} boxes, {len(scores)} scores, {len(labels)} labels")
        assigned = np.full(len(boxes), -1, dtype=np.int64)
        owner: dict[int, Track] = {}  # detection index -> its track this frame
        self._predict()
        high = np.flatnonzero(scores >= cfg.track_thresh)
        low = np.flatnonzero((scores > cfg.low_thresh) & (scores < cfg.track_thresh))
        pool = [t for t in self.tracks if t.confirmed]  # tracked and lost
        unconfirmed = [t for t in self.tracks if not t.confirmed]

        # 1. high detections <-> confirmed tracks (tracked or lost)
        matches, rest_tracks, rest_high = self._associate(pool, boxes[high], scores[high], cfg.match_thresh,
                                                          cfg.fuse_score)
        self._hit(pool, matches, high, boxes, scores, labels, owner)
        # 2. low detections <-> tracks still unmatched that were tracked in the previous frame
        second = [pool[i] for i in rest_tracks if pool[i].state == TRACKED]
        matches2, rest2, _ = self._associate(second, boxes[low], scores[low], cfg.second_match_thresh, False)
        self._hit(second, matches2, low, boxes, scores, labels, owner)
        for i in rest2:
            second[i].state = LOST
        # 3. remaining high detections <-> tracks born in the previous frame
        left = high[rest_high]
        matches3, rest3, rest_left = self._associate(unconfirmed, boxes[left], scores[left],
                                                     cfg.unconfirmed_match_thresh, cfg.fuse_score)
        self._hit(unconfirmed, matches3, left, boxes, scores, labels, owner)
        for i in rest3:
            unconfirmed[i].state = REMOVED
        # 4. new tracks
        births = left[rest_left]
        births = births[scores[births] >= cfg.track_thresh + cfg.new_track_margin]
        if len(births):
            means, covs = self.kalman.initiate(xyxy_to_xyah(boxes[births]))
            for k, di in enumerate(births):
                track = Track(means[k], covs[k], self.frame_id, self.frame_id, float(scores[di]), int(labels[di]))
                if self.frame_id == 1:
                    self._confirm(track)
                self.tracks.append(track)
                owner[int(di)] = track
        # 5. lost tracks age out; duplicates between tracked and lost go
        for track in self.tracks:
            if track.state == LOST and self.frame_id - track.last_frame > self.max_time_lost:
                track.state = REMOVED
        self._remove_duplicates()
        self.tracks = [t for t in self.tracks if t.state != REMOVED]
        for di, track in owner.items():
            if track.confirmed and track.state == TRACKED:
                assigned[di] = track.track_id
        return assigned

    def active(self) -> list[Track]:
        """The confirmed tracks seen in the latest frame."""
        return [t for t in self.tracks if t.confirmed and t.state == TRACKED]

    # ------------------------------------------------------------------------------------------------ steps
    def _predict(self) -> None:
        """Every live track one step ahead (a lost track's height velocity is zeroed, as ByteTrack does)."""
        if not self.tracks:
            return
        mean = np.stack([t.mean for t in self.tracks])
        cov = np.stack([t.covariance for t in self.tracks])
        lost = np.array([t.state != TRACKED for t in self.tracks])
        mean[lost, 7] = 0.0
        mean, cov = self.kalman.predict(mean, cov)
        for k, track in enumerate(self.tracks):
            track.mean, track.covariance = mean[k], cov[k]

    def _associate(self, tracks: list[Track], boxes: np.ndarray, scores: np.ndarray, limit: float,
                   fuse: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(matches [K, 2] of (track, detection), unmatched tracks, unmatched detections) by 1 - IoU."""
        if tracks and len(boxes):
            iou = box_iou(track_boxes(tracks), boxes)
            sim = iou * scores[None, :] if fuse else iou
            return linear_assignment(1.0 - sim, limit)
        return np.zeros((0, 2), np.int64), np.arange(len(tracks)), np.arange(len(boxes))

    def _hit(self, tracks: list[Track], matches: np.ndarray, det_index: np.ndarray, boxes: np.ndarray,
             scores: np.ndarray, labels: np.ndarray, owner: dict[int, Track]) -> None:
        """Correct each matched track with its detection in one batched Kalman update; a lost track is found
        again, an unconfirmed one confirmed.

        Args:
            tracks: the tracks of this association. matches: int [K, 2] (index into ``tracks``, index into
                ``det_index``). det_index: int [D] this association's detections as indices of ``boxes``.
        """
        if not len(matches):
            return
        hit = [tracks[i] for i in matches[:, 0]]
        dets = det_index[matches[:, 1]]
        mean, cov = self.kalman.update(np.stack([t.mean for t in hit]), np.stack([t.covariance for t in hit]),
                                       xyxy_to_xyah(boxes[dets]))
        for k, (track, di) in enumerate(zip(hit, dets)):
            track.mean, track.covariance = mean[k], cov[k]
            track.state, track.last_frame = TRACKED, self.frame_id
            track.score, track.label = float(scores[di]), int(labels[di])
            track.hits += 1
            if not track.confirmed:
                self._confirm(track)
            owner[int(di)] = track

    def _confirm(self, track: Track) -> None:
        track.confirmed = True
        track.track_id = self._next_id
        self._next_id += 1

    def _remove_duplicates(self) -> None:
        """A tracked and a lost confirmed track with IoU > ``duplicate_iou``: the one tracked for fewer frames goes."""
        tracked = [t for t in self.tracks if t.state == TRACKED and t.confirmed]
        lost = [t for t in self.tracks if t.state == LOST]
        if not tracked or not lost:
            return
        iou = box_iou(track_boxes(tracked), track_boxes(lost))
        for i, j in zip(*np.nonzero(iou > self.config.duplicate_iou)):
            a, b = tracked[i], lost[j]
            age_a, age_b = self.frame_id - a.start_frame, self.frame_id - b.start_frame
            (b if age_a > age_b else a).state = REMOVED
