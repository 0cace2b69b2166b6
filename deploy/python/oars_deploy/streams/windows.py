"""Sliding-window clip classification of a stream: ``oars-infer --model-dir VIDEO_EXPORT -i VIDEO|URL|CAMERA
--window N --stride S`` (MMAction2's webcam demo, with exact frame numbers and times).

The last ``N`` decoded frames sit in a ring buffer (never the whole stream); each time ``S`` more frames came in
(the first time: ``N``), the window's frames are sampled as the export's ``sampling`` section says
(:func:`oars_deploy.clips.sampling.sampled_frame_indices` over the ``N`` frames, as over a video of ``N`` frames),
pre-processed (:mod:`oars_deploy.clips.preprocess`) and classified. One record per window
(:class:`ClipWindowRecord`); the annotated video shows, from each window's last frame on, its label and score.
A stream shorter than one window (at least the sampling's ``min_frames``) is classified once, whole. Windows are
classified in batches of ``--batch-size`` (default 1 for a camera or URL, where a batch adds latency; else the
model's batch, or 4); the frames waiting for their batch's labels are the only other frames held. A file that ends
before the frame count its header declares is a listed failure after its windows are written
(:mod:`oars_deploy.streams.ending`).
"""

from __future__ import annotations

import argparse
import os
import os.path as osp
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from oars_deploy.classifiers import check_classify_args
from oars_deploy.clips.preprocess import preprocess_clip
from oars_deploy.clips.sampling import MIN_VIDEO_FRAMES, check_frame_count, sampled_frame_indices
from oars_deploy.errors import DeployError
from oars_deploy.plugins import PredictorRun
from oars_deploy.records import ResultRecord
from oars_deploy.streams.ending import StreamEnd, mark_last_record, stream_failures
from oars_deploy.streams.overlay import draw_caption
from oars_deploy.streams.source import FrameStream, StreamFrame, StreamSource
from oars_deploy.streams.writer import VideoWriter


@dataclass
class ClipWindowRecord(ResultRecord):
    """One window's top-k classes (``predictor: clip_classes``).

    JSON: ``{"predictor", "input", "start_frame", "end_frame", "start", "end", "label", "class", "score",
    "topk": [{"label", "class", "score"}]}``: frames ``start_frame..end_frame`` (0-based, inclusive, in decoding
    order), ``start`` / ``end`` their presentation times in seconds (rounded to 1e-6), the best class first. The
    last record of a stream that ended early (a truncated file) also has ``declared_frames``, ``frames_read``,
    ``truncated: true`` (and ``stream_error`` after a decoding error): :class:`oars_deploy.streams.ending.StreamEnd`.
    """

    predictor: ClassVar[str] = "clip_classes"
    input: str
    start_frame: int
    end_frame: int
    start: float
    end: float
    topk: list[tuple[int, str, float]]
    stream_end: dict | None = None

    def to_json(self) -> dict:
        """See the class docstring."""
        top = [{"label": int(i), "class": name, "score": round(float(score), 6)} for i, name, score in self.topk]
        return {"predictor": self.predictor, "input": self.input, "start_frame": int(self.start_frame),
                "end_frame": int(self.end_frame), "start": round(float(self.start), 6),
                "end": round(float(self.end), 6), "label": top[0]["label"], "class": top[0]["class"],
                "score": top[0]["score"], "topk": top, **(self.stream_end or {})}


def window_input(predictor, frames: list[np.ndarray]) -> np.ndarray:
    """The model input of one window: its frames sampled, pre-processed and shaped as the export takes a video.

    Args:
        predictor: a clip classifier with ``sampling``, ``steps``, ``input_shape`` and ``model_dir`` (the runtime
            ``VideoPredictor``).
        frames: the window's HxWx3 uint8 BGR frames, oldest first.

    Returns:
        float32 ``input_shape[1:]``.
    """
    sampling = predictor.sampling
    inds = sampled_frame_indices(len(frames), sampling)
    clips = int(sampling["num_clips"]) * (2 if sampling.get("twice_sample") else 1)
    clip = preprocess_clip(np.stack([frames[i] for i in inds]), predictor.steps, clips, int(sampling["clip_len"]))
    want = tuple(predictor.input_shape[1:])
    if clip.size != int(np.prod(want)) or -1 in want:
        raise DeployError(f"{predictor.model_dir}: preprocessing gives a clip of shape {list(clip.shape)}, the model "
                          f"takes {list(want)} per video")
    return clip.reshape(want)


def check_window_args(args: argparse.Namespace, sampling: dict) -> tuple[int, int]:
    """``(window, stride)`` from ``--window`` / ``--stride`` (stride default: the window), else a DeployError."""
    window = int(args.window)
    stride = window if getattr(args, "stride", None) is None else int(args.stride)
    need = int(sampling.get("min_frames", MIN_VIDEO_FRAMES))
    if window < need:
        raise DeployError(f"--window {window}: the model's sampling needs at least {need} frames per clip "
                          f"(deploy.yaml sampling.min_frames)")
    if stride < 1:
        raise DeployError(f"--stride must be >= 1 frame, got {stride}")
    if getattr(args, "every", 1) not in (None, 1):
        raise DeployError("--every applies to image models; a clip classifier's windows take every frame "
                          "(use --stride to classify less often)")
    return window, stride


def run_windows(args: argparse.Namespace, source: StreamSource, predictor: Any) -> PredictorRun:
    """Classify the stream ``source`` window by window (see the module docstring).

    Args:
        args: ``oars-infer``'s arguments (``model_dir``, ``output_dir``, ``window``, ``stride``, ``topk``,
            ``batch_size``, ``max_frames``, ``device``, ``backend``).
        source: the stream.
        predictor: what classifies the windows (the runtime ``VideoPredictor`` interface): the export's, from the
            clip plug-in's :meth:`~oars_deploy.plugins.PredictorPlugin.run_windows`, or the PyTorch model's from
            ``tools/infer.py`` (``video.stream_windows``).

    Returns:
        PredictorRun: one :class:`ClipWindowRecord` per window, in order; ``total`` 1 (the stream); ``failures``
        the stream when it ended before its end (a truncated file, a decoding error: the windows read are
        classified, the last record says so, :mod:`oars_deploy.streams.ending`). Writes
        ``<output_dir>/<name>_vis.mp4``.
    """
    check_classify_args(args, "clip")
    window, stride = check_window_args(args, predictor.sampling)
    batch_size = args.batch_size or (1 if source.kind != "file" else (predictor.batch_size or 4))
    os.makedirs(args.output_dir, exist_ok=True)
    video_path = osp.join(args.output_dir, f"{source.name}_vis.mp4")
    ring: deque[StreamFrame] = deque(maxlen=window)
    waiting: list[tuple[StreamFrame, StreamFrame, np.ndarray]] = []  # (first, last frame, model input)
    unwritten: list[StreamFrame] = []
    records: list[ClipWindowRecord] = []
    caption: list[str] = []
    decoded = 0
    started = time.perf_counter()

    def flush(writer: VideoWriter) -> None:
        nonlocal caption
        labelled: dict[int, list[str]] = {}
        if waiting:
            scores = predictor.infer(np.stack([x for _, _, x in waiting]))
            for (first, last, _), row in zip(waiting, scores):
                top = predictor.result({}, row, args.topk)["topk"]
                records.append(ClipWindowRecord(source.location, first.index, last.index, first.time, last.time, top))
                print(f"frames {first.index}-{last.index} ({first.time:.2f}-{last.time:.2f} s): "
                      + ", ".join(f"{name} ({score:.4f})" for _, name, score in top))
                labelled[last.index] = [f"{top[0][1]} {top[0][2]:.2f}", f"frames {first.index}-{last.index}"]
        for frame in unwritten:  # each frame shows the latest window ending at or before it
            caption = labelled.get(frame.index, caption)
            writer.write(draw_caption(frame.image, caption) if caption else frame.image)
        waiting.clear()
        unwritten.clear()

    with FrameStream(source) as stream, VideoWriter(video_path, stream.fps) as writer:
        try:
            for frame in stream:
                ring.append(frame)
                unwritten.append(frame)
                decoded += 1
                if decoded >= window and (decoded - window) % stride == 0:
                    waiting.append((ring[0], ring[-1], window_input(predictor, [f.image for f in ring])))
                    if len(waiting) >= batch_size:
                        flush(writer)
                if args.max_frames is not None and decoded >= args.max_frames:
                    break
        except KeyboardInterrupt:  # a camera or live stream ends when the user says so
            print(f"stopped by the user after {decoded} frames")
        end = stream.early_end()
        if not records and not waiting and not too_short_after_early_end(end, len(ring), predictor.sampling):
            # shorter than one window: the whole stream once, if long enough
            check_frame_count(source.location, len(ring), predictor.sampling, DeployError)
            waiting.append((ring[0], ring[-1], window_input(predictor, [f.image for f in ring])))
        flush(writer)
    elapsed = max(time.perf_counter() - started, 1e-9)
    mark_last_record(records, end)
    print(f"{source.name}: {decoded} frames read, {len(records)} windows of {window} frames (stride {stride}) "
          f"classified in {elapsed:.1f} s ({decoded / elapsed:.1f} frames/s); annotated video {video_path} at "
          f"{stream.fps:g} fps" + (f"; {end.message()}" if end is not None else ""))
    return PredictorRun(records=list(records), failures=stream_failures(end), total=1)


def too_short_after_early_end(end: StreamEnd | None, frames: int, sampling: dict) -> bool:
    """Whether a stream that ended early left too few frames for even one clip (``sampling['min_frames']``): then
    nothing is classified and the early end is the one failure named (not the frame count it caused)."""
    return end is not None and frames < int(sampling.get("min_frames", MIN_VIDEO_FRAMES))
