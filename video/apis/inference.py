"""Classify video files with a trained recognizer: the config's test pipeline (sampling, resize, crops, views),
the model's ``predict``, and per video the top-k classes.

Writes ``predictions.json`` in the deployed predictor's format (``oars_deploy.predictors.clip_classes.cli.record``:
``video``,
``label``, ``label_name``, ``score``, ``topk``, ``total_frames``, ``frame_inds``), so a PyTorch run and an ONNX run
of the same model can be compared line by line, and ``<stem>_strip.png`` per video: the frames the model saw (first
view) above its top-3 classes (``video.visualization.draw_clip_strip``), and ``results.jsonl`` (one
``oars_deploy.records.ClipClassesRecord`` per video, as oars-infer writes it).
"""

from __future__ import annotations

import json
import os
import os.path as osp
from collections.abc import Sequence

import cv2
import numpy as np
import torch
from mmengine.config import Config
from mmengine.dataset import Compose, pseudo_collate

from oars.errors import OarsError
from oars.inference import build_test_pipeline, check_output_folder
from oars.pipelines.model import init_model
from oars_deploy.atomic import atomic_write
from oars_deploy.errors import UserError
from oars_deploy.failures import Failures
from oars_deploy.output_paths import output_stems
from oars_deploy.predictors.clip_classes.cli import PREDICTIONS_FILE, list_videos, record
from oars_deploy.predictors.clip_classes.records import ClipClassesRecord
from oars_deploy.records import write_results
from video.engine.clip_pictures import clip_frames, clip_strip
from video.visualization import top_predictions

CLIP_LOADERS = ("VideoInit",)  # a test pipeline must start from a video file to classify files
STRIP_NAMES = ("{stem}_strip.png",)  # the file written per video, as a template of its output stem


def check_pipeline(cfg: Config) -> None:
    loader = cfg.get("test_dataloader") or cfg.get("val_dataloader") or {}
    steps = [s.get("type") for s in loader.get("dataset", {}).get("pipeline", [])]
    if not any(s in CLIP_LOADERS for s in steps):
        raise OarsError(f"{cfg.filename}: tools/infer.py classifies video files, but the test pipeline {steps} does "
                        "not open one (no VideoInit step); frame-folder and feature-file models are evaluated with "
                        "tools/eval.py on their annotation lists")


def predict_video(model: torch.nn.Module, pipeline: Compose, path: str) -> tuple[object, torch.Tensor]:
    """One video through the test pipeline and ``model.test_step``.

    Args:
        model: a recognizer in eval mode. pipeline: the config's test pipeline.
        path: the video file.

    Returns:
        (the predicted ``ActionDataSample``: ``pred_score`` float [C], ``pred_label`` long [1]; the uint8 clip the
        model saw, [V*T, 3, H, W] (NCHW) or [V, 3, T, H, W] (NCTHW)).

    Raises:
        oars.errors.DataError: the file cannot be opened or decoded (names the file).
    """
    num_classes = int(model.num_classes)
    packed = pipeline({"filename": osp.abspath(path), "start_index": 0, "modality": "RGB", "multi_label": False,
                       "num_classes": num_classes})
    with torch.no_grad():
        sample = model.test_step(pseudo_collate([packed]))[0]
    return sample, packed["inputs"]


def classify_video(model: torch.nn.Module, pipeline: Compose, classes: Sequence[str], path: str,
                   topk: int = 5) -> dict:
    """One video's result, as ``tools/infer.py`` writes it and ``oars.Model.predict`` returns it (the one
    computation behind both: the video predictor role's ``predict`` calls this).

    Args:
        model: a recognizer in eval mode. pipeline: the config's test pipeline. classes: the class names.
        path: the video file. topk: how many classes to keep (at most the model's).

    Returns:
        ``{'path', 'topk': [(id, name, score)], 'total_frames', 'frame_inds': int [T], 'record':
        ClipClassesRecord, 'picture': uint8 BGR strip of the frames the model saw (first view) above its top-3}``.

    Raises:
        oars.errors.DataError: the file cannot be opened or decoded (names the file).
    """
    sample, clip = predict_video(model, pipeline, path)
    scores = sample.pred_score.detach().cpu().float().numpy()
    best = top_predictions(scores, min(topk, scores.shape[0]))
    result = {"path": path, "topk": [(i, str(classes[i]), s) for i, s in best],
              "total_frames": sample.metainfo.get("total_frames", 0),
              "frame_inds": np.asarray(sample.metainfo.get("frame_inds", [])).reshape(-1)}
    result["record"] = ClipClassesRecord.from_result(result)
    result["picture"] = clip_strip(sample, clip_frames(sample, clip), classes)
    return result


def run_inference(cfg: Config, checkpoint: str, inputs: str, out_dir: str, device: str = "cpu",
                  failures: Failures | None = None, topk: int = 5) -> list[str]:
    """Classify ``inputs`` (a video file or a folder of videos); print each video's top-1, write
    ``OUT_DIR/predictions.json`` (top-``topk`` per video), ``OUT_DIR/results.jsonl`` and ``OUT_DIR/<stem>_strip.png``;
    returns the strip paths.

    A still image, a frame-feature file or a folder without videos is refused at once (``UserError`` saying what
    video models take; :func:`oars_deploy.predictors.clip_classes.cli.list_videos`). A video that cannot be read (a
    still image
    named like a video among them) is skipped and recorded in ``failures`` (the others are predicted); without
    ``failures`` their summary is raised (:class:`oars_deploy.failures.FolderFailuresError`) at the end.

    ``<stem>`` follows the rule of every oars output name (:func:`oars_deploy.output_paths.output_stems`): the
    file's stem, or ``x_mp4`` / ``x_avi`` for ``x.mp4`` beside ``x.avi`` (one strip would otherwise replace the
    other); a name that still collides is refused before the model is loaded
    (:class:`oars_deploy.output_paths.OutputPathError`, naming both inputs).
    """
    check_output_folder(out_dir, inputs)
    check_pipeline(cfg)
    paths = list_videos(inputs)  # a still image, a feature file or a folder without videos: refused before loading
    stems = output_stems(paths, STRIP_NAMES)  # a name collision too
    own = failures is None
    failures = Failures(what="videos") if own else failures
    failures.what = "videos"  # the caller's summary counts videos, not images
    model = init_model(cfg, checkpoint, device)
    classes: Sequence[str] = model.dataset_meta.get("classes") or [str(i) for i in range(model.num_classes)]
    pipeline = build_test_pipeline(cfg)
    os.makedirs(out_dir, exist_ok=True)
    written, records, results = [], [], []
    for path in paths:
        try:
            result = classify_video(model, pipeline, classes, path, topk)
        except UserError as err:
            failures.add(path, str(err))
            continue
        records.append(record(result))
        results.append(result["record"])
        best = result["topk"][0]
        print(f"{path}: {best[1]} ({best[2]:.4f})")
        out = osp.join(out_dir, STRIP_NAMES[0].format(stem=stems[path]))
        cv2.imwrite(out, result["picture"])
        written.append(out)
    atomic_write(osp.join(out_dir, PREDICTIONS_FILE), json.dumps(records, indent=1))
    write_results(results, out_dir)
    if own:
        failures.raise_if_any(total=len(paths))
    return written
