"""``oars-infer`` for video models: classify a video file or every video of a folder, print and write the top-k.

``cli.run`` hands a model folder whose deploy.yaml has a ``sampling`` section here. Per video it prints
``path: name (score), ...`` (the top-k, highest first) and writes ``OUT_DIR/predictions.json``: a list of
``{"video", "label", "label_name", "score", "topk": [{"class_id", "label", "score"}], "total_frames",
"frame_inds"}`` in the order of the files. A video that cannot be decoded is skipped and listed at the end
(exit status 2), as images are. With the plug-in (:mod:`oars_deploy.predictors.clip_classes`) the CLI also
writes results.jsonl (one :class:`~oars_deploy.predictors.clip_classes.records.ClipClassesRecord` per video).
"""

from __future__ import annotations

import argparse
import json
import os
import os.path as osp
from collections.abc import Callable

from oars_deploy.atomic import atomic_write
from oars_deploy.classifiers import check_classify_args
from oars_deploy.clips.inputs import VIDEO_MODELS_TAKE, VIDEO_SUFFIXES, folder_contents, not_a_video
from oars_deploy.errors import DeployError, UserError
from oars_deploy.failures import Failures
from oars_deploy.predictors.clip_classes.predictor import VideoPredictor
from oars_deploy.predictors.clip_classes.records import ClipClassesRecord
from oars_deploy.records import ResultRecord

PREDICTIONS_FILE = "predictions.json"


def list_videos(path: str) -> list[str]:
    """``path`` itself when it is a video file, else the videos of the folder (sorted by name).

    Why the checks: FFmpeg opens a still image as a one-frame video, which the model would classify into a motion
    class; a picture (by its bytes, whatever its suffix) or a frame-feature file given as the input, or a folder
    holding no videos, is refused here with what video models take (:mod:`oars_deploy.clips.inputs`). A still
    image named like a video inside a folder is refused by the decoder with the same message and listed with the
    other failures.

    Raises:
        UserError: ``path`` does not exist, is not a video (a still image, a feature file), or is a folder
            without videos (the message says what it holds instead).
    """
    if osp.isfile(path):
        reason = not_a_video(path)
        if reason is not None:
            raise UserError(reason)
        return [path]
    if not osp.isdir(path):
        raise UserError(f"input {path!r} is neither a video file nor a folder")
    files = sorted(osp.join(path, f) for f in os.listdir(path) if f.lower().endswith(VIDEO_SUFFIXES))
    if not files:
        raise UserError(f"no videos ({', '.join(VIDEO_SUFFIXES)}) in folder {path}: {folder_contents(path)}; "
                        f"{VIDEO_MODELS_TAKE}")
    return files


def record(result: dict) -> dict:
    """The JSON record of one :meth:`VideoPredictor.predict` result."""
    best = result["topk"][0]
    return {"video": result["path"], "label": best[0], "label_name": best[1], "score": best[2],
            "topk": [{"class_id": i, "label": name, "score": score} for i, name, score in result["topk"]],
            "total_frames": int(result["total_frames"]), "frame_inds": [int(i) for i in result["frame_inds"]]}


def format_result(result: dict) -> str:
    return f"{result['path']}: " + ", ".join(f"{name} ({score:.4f})" for _, name, score in result["topk"])


def classify_files(predictor, paths: list[str], args: argparse.Namespace, what: str, default_batch: int,
                   failures: Failures | None = None, results: list[ResultRecord] | None = None,
                   make_record: Callable[[dict], ResultRecord] | None = None) -> list[dict]:
    """Classify ``paths`` in batches with ``predictor`` (a :class:`VideoPredictor` or a ``FeaturePredictor``: both
    have ``load(path) -> (input, meta)``, ``infer(batch) -> scores [B, C]``, ``result(meta, row, k)`` and
    ``batch_size``), print each top-k, write ``predictions.json``; unreadable files are skipped and listed at the
    end (``what``: their plural noun in that list). Returns the JSON records.

    Args:
        failures: where unreadable files go; None raises their summary at the end (after predictions.json).
        results: with ``make_record``, one result record per classified file is appended (for results.jsonl).
    """
    import numpy as np

    batch_size = args.batch_size or predictor.batch_size or default_batch
    own = failures is None
    failures = Failures(what=what, verb="could not be classified") if own else failures
    records = []
    for start in range(0, len(paths), batch_size):
        loaded = []
        for path in paths[start:start + batch_size]:
            try:
                loaded.append(predictor.load(path))
            except DeployError as err:
                failures.add(path, str(err))
        if not loaded:
            continue
        scores = predictor.infer(np.stack([x for x, _ in loaded]))
        for (_, meta), row in zip(loaded, scores):
            result = predictor.result(meta, row, args.topk)
            print(format_result(result))
            records.append(record(result))
            if results is not None and make_record is not None:
                results.append(make_record(result))
    os.makedirs(args.output_dir, exist_ok=True)
    out = osp.join(args.output_dir, PREDICTIONS_FILE)
    atomic_write(out, json.dumps(records, indent=1))
    print(f"wrote {len(records)} predictions to {out}")
    if own:
        failures.raise_if_any(total=len(paths))
    return records


def run_video(args: argparse.Namespace, failures: Failures | None = None,
              results: list[ResultRecord] | None = None) -> list[dict]:
    """Classify ``args.input`` with the model of ``args.model_dir``; returns the JSON records of predictions.json.

    Args:
        failures: where undecodable videos go (None: their summary is raised at the end).
        results: when given, one :class:`~.records.ClipClassesRecord` per video is appended.
    """
    check_classify_args(args, "video")
    paths = list_videos(args.input)  # before loading the model: a wrong input is told at once
    predictor = VideoPredictor(args.model_dir, device=args.device, backend=args.backend)
    return classify_files(predictor, paths, args, "videos", default_batch=4, failures=failures, results=results,
                          make_record=ClipClassesRecord.from_result)
