"""An image model over a stream: every N-th frame predicted, results per frame in results.jsonl with their times,
and an annotated H.264 video at the source's frame rate (MMDetection's video demo, PaddleDetection's
``--video_file`` / ``--camera_id``, ``yolo predict source=...``).

Frames are predicted in batches of ``--batch-size`` (default 1 for a camera or URL, where a batch would add its
wait to the latency, else the model's batch); every decoded frame goes into the output video, a frame that was
not predicted (``--every``) drawn with the latest result before it, so the video keeps its timing. One frame per
pending batch is in memory, never the stream. Ctrl-C ends a camera or live stream: what was read is written.
With ``--track`` (detection models) each predicted frame goes through ByteTrack (:mod:`oars_deploy.track.stream`):
the records carry ``track_id`` per detection and the video shows the tracked boxes, a colour per id.
A file that ends before the frame count its header declares (truncated, damaged) is a listed failure: what was read
is predicted and written, then ``oars-infer`` says what is missing and exits with status 2
(:mod:`oars_deploy.streams.ending`).
"""

from __future__ import annotations

import argparse
import os
import os.path as osp
import time
from dataclasses import dataclass
from typing import Any

from oars_deploy.errors import DeployError
from oars_deploy.plugins import PredictorRun
from oars_deploy.records import ResultRecord
from oars_deploy.streams.ending import mark_last_record, stream_failures
from oars_deploy.streams.source import FrameStream, StreamFrame, StreamSource
from oars_deploy.streams.writer import VideoWriter
from oars_deploy.track.stream import StreamTracker, can_track
from oars_deploy.words import plural


@dataclass(eq=False)
class StreamFrameRecord(ResultRecord):
    """One predicted frame of a stream: the image plug-in's record with the stream and the frame's place in it.

    JSON: the frame's record (``predictor``, ``image_size``, detections / classes ...) with ``input`` the stream
    (file, URL or camera), ``frame`` (0-based index in decoding order) and ``time`` (presentation time, seconds,
    rounded to 1e-6); the last record of a stream that ended early (a truncated file) also has ``declared_frames``,
    ``frames_read``, ``truncated: true`` (and ``stream_error`` after a decoding error): see
    :class:`oars_deploy.streams.ending.StreamEnd`. The other records have none of these keys.
    """

    frame_record: ResultRecord
    input: str
    frame: int
    time: float
    stream_end: dict | None = None

    @property
    def predictor(self) -> str:  # type: ignore[override]  (the wrapped plug-in's name)
        return self.frame_record.predictor

    def to_json(self) -> dict:
        """See the class docstring."""
        out = self.frame_record.to_json()
        out.update(input=self.input, frame=int(self.frame), time=round(float(self.time), 6))
        out.update(self.stream_end or {})
        return out


def check_stream_args(args: argparse.Namespace) -> int:
    """``--every`` as an int >= 1 (and ``--max-frames`` >= 1 when given), else a :class:`DeployError`."""
    every = getattr(args, "every", None)
    every = 1 if every is None else every
    if every < 1:
        raise DeployError(f"--every must be >= 1 (predict every N-th frame), got {every}")
    max_frames = getattr(args, "max_frames", None)
    if max_frames is not None and max_frames < 1:
        raise DeployError(f"--max-frames must be >= 1, got {max_frames}")
    return int(every)


def run_stream(plugin: Any, predictor: Any, args: argparse.Namespace, source: StreamSource) -> PredictorRun:
    """Predict the stream ``source`` with an image plug-in (see the module docstring).

    Args:
        plugin: an image plug-in (its ``draw`` and ``record``, ``tracks`` for ``--track``).
        predictor: the loaded :class:`oars_deploy.predictor.Predictor`.
        args: ``oars-infer``'s arguments (``output_dir``, ``batch_size``, ``every``, ``max_frames``, ``track`` and
            the ``--track-*`` flags).
        source: the stream.

    Returns:
        PredictorRun: one :class:`StreamFrameRecord` per predicted frame, in order; ``total`` 1 (the stream);
        ``failures`` the stream when it ended before its end (a truncated file, a decoding error:
        :mod:`oars_deploy.streams.ending`), its last record then saying so. Writes ``<output_dir>/<name>_vis.mp4``.
    """
    every = check_stream_args(args)
    tracking = bool(getattr(args, "track", False))
    if tracking:
        if not can_track(plugin):
            raise DeployError(f"--track applies to detection models, not to predictor {plugin.name!r}")
    live = source.kind != "file"
    batch_size = args.batch_size or (1 if live else (predictor.batch_size or 8))
    os.makedirs(args.output_dir, exist_ok=True)
    video_path = osp.join(args.output_dir, f"{source.name}_vis.mp4")
    records: list[ResultRecord] = []
    pending: list[StreamFrame] = []
    latest: dict | None = None
    latest_ids = None
    tracker = None
    decoded = predicted = 0
    started = time.perf_counter()

    def flush(writer: VideoWriter) -> None:
        nonlocal latest, latest_ids, predicted
        chosen = [f for f in pending if f.index % every == 0]
        results = dict(zip((f.index for f in chosen), predictor.predict([f.image for f in chosen]))) if chosen \
            else {}
        for frame in pending:
            if frame.index in results:
                latest = results[frame.index]
                stem = f"{source.name}_{frame.index:06d}"
                record = plugin.record(args.output_dir, stem, stem, frame.image, latest, predictor)
                if tracker is not None:
                    latest_ids = tracker.update(latest)
                    record = tracker.record(record, latest_ids)
                records.append(StreamFrameRecord(record, source.location, frame.index, frame.time))
                predicted += 1
            if latest is None:
                shown = frame.image
            elif tracker is not None:
                shown = tracker.draw(frame.image, latest, latest_ids, predictor)
            else:
                shown = plugin.draw(frame.image, latest, predictor, args)
            writer.write(shown)
        pending.clear()

    with FrameStream(source) as stream, VideoWriter(video_path, stream.fps) as writer:
        tracker = StreamTracker(args, stream.fps) if tracking else None
        try:
            for frame in stream:
                pending.append(frame)
                decoded += 1
                if sum(f.index % every == 0 for f in pending) >= batch_size:
                    flush(writer)
                if args.max_frames is not None and decoded >= args.max_frames:
                    break
        except KeyboardInterrupt:  # a camera or live stream ends when the user says so
            print(f"stopped by the user after {plural(decoded, 'frame')}")
        flush(writer)
        end = stream.early_end()
    elapsed = max(time.perf_counter() - started, 1e-9)
    mark_last_record(records, end)
    print(f"{source.name}: {plural(decoded, 'frame')} read, {predicted} predicted in {elapsed:.1f} s "
          f"({decoded / elapsed:.1f} frames/s read and written, {predicted / elapsed:.1f} predicted/s); "
          f"annotated video {video_path} at {stream.fps:g} fps"
          + (f"; {len(tracker.ids_seen)} tracks" if tracker is not None else "")
          + (f"; {end.message()}" if end is not None else ""))
    return PredictorRun(records=records, failures=stream_failures(end), total=1)
