"""ByteTrack's settings: one frozen dataclass holding the defaults, the ``oars-infer`` flags that override them.

Why one place: the flags (``--track-thresh``, ``--match-thresh``, ``--track-buffer``, ``--track-frame-rate``)
default to None and take their value from :class:`TrackerConfig`, so the CLI, the Python API and the tests read the
same numbers, as ``oars-serve``'s options do (:mod:`oars_deploy.serve.options`). The defaults are ByteTrack's
(Zhang et al. 2022, its MOT17 setting).
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass

from oars_deploy.errors import DeployError


@dataclass(frozen=True)
class TrackerConfig:
    """What a :class:`~oars_deploy.track.byte_tracker.ByteTracker` needs.

    Attributes:
        track_thresh: detections at or above this score are "high" (first association; they can start tracks);
            those between ``low_thresh`` and it are "low" (second association, to keep tracks through occlusion).
        match_thresh: the most 1 - IoU (score-fused) a high detection and a track may cost to match.
        track_buffer: frames a lost track is kept at ``base_frame_rate`` fps (scaled by ``frame_rate``).
        frame_rate: frames per second of what the tracker sees; None: the stream's (divided by ``--every``).
        base_frame_rate: the rate ``track_buffer`` is counted at (ByteTrack's 30).
        low_thresh: detections at or below this score are ignored.
        new_track_margin: a track starts from a detection scoring at least ``track_thresh`` + this.
        second_match_thresh: the 1 - IoU limit of the second association (low detections, tracked tracks).
        unconfirmed_match_thresh: the limit for a track seen in one frame only (it is confirmed by a match).
        duplicate_iou: a tracked and a lost track overlapping more than this are one object (the younger goes).
        fuse_score: first and unconfirmed associations weigh IoU by the detection score.
    """

    track_thresh: float = 0.5
    match_thresh: float = 0.8
    track_buffer: int = 30
    frame_rate: float | None = None
    base_frame_rate: float = 30.0
    low_thresh: float = 0.1
    new_track_margin: float = 0.1
    second_match_thresh: float = 0.5
    unconfirmed_match_thresh: float = 0.7
    duplicate_iou: float = 0.85
    fuse_score: bool = True

    def __post_init__(self) -> None:
        unit = ("track_thresh", "match_thresh", "low_thresh", "second_match_thresh", "unconfirmed_match_thresh",
                "duplicate_iou")
        for key in unit:
            value = getattr(self, key)
            if not 0.0 <= value <= 1.0:
                raise DeployError(f"tracking option {key}: got {value!r}; expected a number in [0, 1]")
        if self.track_buffer < 0:
            raise DeployError(f"tracking option track_buffer: got {self.track_buffer!r}; expected frames >= 0")
        if self.frame_rate is not None and not self.frame_rate > 0:
            raise DeployError(f"tracking option frame_rate: got {self.frame_rate!r}; expected frames/s > 0")
        if self.low_thresh >= self.track_thresh:
            raise DeployError(f"tracking option low_thresh {self.low_thresh} must be below track_thresh "
                              f"{self.track_thresh}")

    def max_time_lost(self, frame_rate: float) -> int:
        """Frames (at ``frame_rate``) a lost track survives: ``track_buffer`` scaled from ``base_frame_rate``."""
        return int(frame_rate / self.base_frame_rate * self.track_buffer)


# flag -> TrackerConfig field (type float unless the field is an int)
TRACK_FLAGS = {"--track-thresh": "track_thresh", "--match-thresh": "match_thresh",
               "--track-buffer": "track_buffer", "--track-frame-rate": "frame_rate"}


def add_track_arguments(parser: argparse.ArgumentParser) -> None:
    """``--track`` and its parameters (defaults: :class:`TrackerConfig`)."""
    defaults = TrackerConfig()
    parser.add_argument("--track", action="store_true",
                        help="detection streams: ByteTrack track ids in the records and the annotated video")
    helps = {"track_thresh": "score splitting high from low detections; high ones can start tracks",
             "match_thresh": "largest 1 - IoU of a first-stage match",
             "track_buffer": "frames a lost track is kept (at 30 fps, scaled by the frame rate)",
             "frame_rate": "frames/s of the predicted frames (default: the stream's / --every)"}
    for flag, key in TRACK_FLAGS.items():
        kind = int if key == "track_buffer" else float
        default = getattr(defaults, key)
        parser.add_argument(flag, type=kind, default=None,
                            help=f"--track: {helps[key]}" + ("" if default is None else f" (default {default})"))


def tracker_config(args: argparse.Namespace) -> TrackerConfig:
    """The :class:`TrackerConfig` of ``oars-infer``'s flags (the flags not given keep the defaults).

    Raises:
        DeployError: a value out of range, naming the flag.
    """
    given = {key: getattr(args, key) for key in TRACK_FLAGS.values() if getattr(args, key, None) is not None}
    try:
        return dataclasses.replace(TrackerConfig(), **given)
    except DeployError as err:
        flag = next((f for f, k in TRACK_FLAGS.items() if f"option {k}:" in str(err)), None)
        raise DeployError(f"{flag}: {err}" if flag else str(err)) from None
