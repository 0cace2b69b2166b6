"""``oars-infer`` for temporal localisers: a video file or every video of a folder -> timed action segments.

Per video it prints the best segments, writes ``OUT_DIR/<stem>_timeline.png`` (``<stem>``: unique per video,
:func:`oars_deploy.output_paths.output_stems`; a strip of frames over the
predicted segments along the time axis, :func:`.timeline.draw_timeline`; no ground truth at run
time) and returns one :class:`~oars_deploy.predictors.video_segments.record.VideoSegmentsRecord`, which the CLI
writes to results.jsonl. A video that cannot be decoded is skipped and listed at the end (exit status 2).
"""

from __future__ import annotations

import argparse
import os
import os.path as osp

import cv2

from oars_deploy.atomic import atomic_write
from oars_deploy.errors import DeployError
from oars_deploy.failures import Failures
from oars_deploy.output_paths import output_stems
from oars_deploy.predictors.clip_classes.cli import list_videos
from oars_deploy.predictors.video_segments.predictor import SegmentsPredictor
from oars_deploy.predictors.video_segments.record import VideoSegmentsRecord
from oars_deploy.predictors.video_segments.timeline import draw_timeline
from oars_deploy.records import ResultRecord

SHOWN = 3  # segments printed per video
DRAWN = 20  # segments drawn per video (the best ones)


def check_segment_args(args: argparse.Namespace) -> None:
    """Flags of other kinds of models are refused rather than ignored."""
    if getattr(args, "draw_threshold", None) is not None:
        raise DeployError("--draw-threshold applies to detection models, not to temporal localisers (every segment "
                          "is written; the timeline draws the best ones)")
    if args.batch_size is not None and args.batch_size < 1:
        raise DeployError(f"--batch-size must be >= 1, got {args.batch_size}")


def timeline_picture(result: dict, labels: list[str], title: str) -> object:
    """The timeline of one :meth:`SegmentsPredictor.predict` result: its best :data:`DRAWN` detections over the
    strip of frames (BGR uint8 [H, W, 3])."""
    dets = result["detections"][:DRAWN]
    predicted = [(float(s), float(e), int(c), float(p)) for s, e, p, c in dets]
    return draw_timeline(result["duration_second"], predicted, None, result["strip"], labels, title=title)


def run_segments(args: argparse.Namespace, failures: Failures, results: list[ResultRecord]) -> int:
    """Localise actions in ``args.input`` with the model of ``args.model_dir``; returns how many videos there were.

    Args:
        failures: where undecodable videos go. results: one record per localised video is appended.
    """
    check_segment_args(args)
    paths = list_videos(args.input)  # before loading the model: a wrong input is told at once
    stems = output_stems(paths, ("{stem}_timeline.png",))  # x.mp4 beside x.avi: x_mp4_timeline.png, x_avi_...
    predictor = SegmentsPredictor(args.model_dir, device=args.device, backend=args.backend,
                                  batch_size=args.batch_size)
    os.makedirs(args.output_dir, exist_ok=True)
    for path in paths:
        try:
            result = predictor.predict(path)
        except DeployError as err:
            failures.add(path, str(err))
            continue
        name = f"{stems[path]}_timeline.png"
        picture = timeline_picture(result, predictor.labels, f"{osp.basename(path)}: {result['num_snippets']} "
                                   f"snippets, {len(result['detections'])} segments")
        ok, png = cv2.imencode(".png", picture)
        if not ok:
            raise DeployError(f"could not encode the timeline picture of {path}")
        atomic_write(osp.join(args.output_dir, name), png.tobytes())
        record = VideoSegmentsRecord(input=path, duration_second=result["duration_second"],
                                     feature_second=result["feature_second"], num_snippets=result["num_snippets"],
                                     class_ids=result["classes"], class_scores=result["class_scores"],
                                     detections=result["detections"], labels=predictor.labels, timeline=name)
        results.append(record)
        best = record.to_json()["segments"][:SHOWN]
        print(f"{path}: " + (", ".join(f"{s['class']} {s['start']:.1f}-{s['end']:.1f} s ({s['score']:.3f})"
                                       for s in best) or "no segments"))
    return len(paths)
