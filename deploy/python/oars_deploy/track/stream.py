"""``oars-infer --track``: ByteTrack over a detection stream's predicted frames (records and pictures).

The stream loop (:func:`oars_deploy.streams.run.run_stream`) hands each predicted frame's result here:
:meth:`StreamTracker.update` advances the tracker and gives each detection its track id, :meth:`StreamTracker.record`
adds the ids to the frame's record, :meth:`StreamTracker.draw` draws the tracked boxes (a colour per id). With
``--every N`` the tracker sees every N-th frame, so its frame rate is the stream's divided by N.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

import numpy as np

from oars_deploy.errors import DeployError
from oars_deploy.records import ResultRecord
from oars_deploy.track.byte_tracker import ByteTracker
from oars_deploy.track.draw import draw_tracks
from oars_deploy.track.options import tracker_config


def can_track(plugin: Any) -> bool:
    """Whether ``plugin``'s results are boxes with scores and labels: the plug-in says so
    (:attr:`oars_deploy.plugins.PredictorPlugin.tracks`; the box and instance-mask plug-ins and their subclasses)."""
    return bool(getattr(plugin, "tracks", False))


@dataclass(eq=False)
class TrackedRecord(ResultRecord):
    """A detection frame's record with each detection's ``track_id`` (an int, or None for a detection no confirmed
    track holds: a low score, or a track born in this frame).

    JSON: the wrapped record's, each entry of ``detections`` with ``track_id`` added.
    """

    frame_record: ResultRecord
    track_ids: np.ndarray

    @property
    def predictor(self) -> str:  # type: ignore[override]  (the wrapped plug-in's name)
        return self.frame_record.predictor

    def to_json(self) -> dict:
        """See the class docstring."""
        out = self.frame_record.to_json()
        detections = out.get("detections", [])
        if len(detections) != len(self.track_ids):
            raise ValueError(f"TrackedRecord: {len(self.track_ids)} track ids for {len(detections)} detections")
        for det, tid in zip(detections, self.track_ids):
            det["track_id"] = int(tid) if tid >= 0 else None
        return out


class StreamTracker:
    """One stream's tracker and how its results are recorded and drawn.

    Args:
        args: ``oars-infer``'s arguments (the ``--track-*`` flags, ``--every``).
        stream_fps: the stream's frame rate (0 when unknown: ByteTrack's 30 is taken).
    """

    def __init__(self, args: argparse.Namespace, stream_fps: float) -> None:
        every = max(int(getattr(args, "every", 1) or 1), 1)
        self.config = tracker_config(args)
        self.tracker = ByteTracker(self.config, frame_rate=stream_fps / every if stream_fps > 0 else 0.0)
        self.ids_seen: set[int] = set()

    def update(self, result: dict) -> np.ndarray:
        """Advance one predicted frame: ``result`` is the plug-in's ``{'bboxes' [K, 4], 'scores' [K],
        'labels' [K]}``; returns int64 [K] track ids (-1: none)."""
        if "bboxes" not in result:
            raise DeployError("--track needs boxes: this model's results have none")
        ids = self.tracker.update(result["bboxes"], result["scores"], result["labels"])
        self.ids_seen.update(int(i) for i in ids[ids >= 0])
        return ids

    @staticmethod
    def record(frame_record: ResultRecord, ids: np.ndarray) -> TrackedRecord:
        """The frame's record with its track ids."""
        return TrackedRecord(frame_record, ids)

    @staticmethod
    def draw(img: np.ndarray, result: dict, ids: np.ndarray, predictor: Any) -> np.ndarray:
        """The tracked boxes over ``img`` (HxWx3 uint8 BGR) with ``#id class score`` captions."""
        return draw_tracks(img, result["bboxes"], ids, result["labels"], result["scores"], predictor.labels)
