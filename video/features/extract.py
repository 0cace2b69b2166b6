"""``tools/extract_features.py``: snippet features of long videos from a trained recognizer, for BMN.

``-c RECOGNIZER_CFG -w CKPT -i VIDEOS -o OUT [--snippet N] [--stride S] [--workers W] [--batch-size B] [--device
cpu] [-o key=value ...]``: every video of ``-i`` (a file or a folder) is cut into snippets of ``N`` frames every
``S`` frames (:mod:`video.features.snippets`), each run through the recognizer's test-pipeline steps and model, and
its pooled features (:mod:`video.features.pooled`) written as ``OUT/<video_id>.npy`` (float32 [T, C]) with
``OUT/videos.json`` (:mod:`video.features.outputs`), and the video's class probabilities (the mean over its snippets
of the recognizer's prediction) as ``OUT/<video_id>.scores.npy`` (float32 [K]). Videos decode in DataLoader workers
(:mod:`video.features.clips`); finished videos are skipped on a rerun; an unreadable video is listed at the end
(exit status 2) while the others are written.
"""

from __future__ import annotations

import argparse
import os.path as osp
from dataclasses import dataclass, field

import numpy as np
from mmengine.config import Config

from oars.errors import OarsError
from oars_deploy.atomic import remove_stale_temp_files
from oars_deploy.failures import Failures
from oars_deploy.output_paths import check_output_folder

USAGE = ("tools/extract_features.py -c configs/video/tsm/tsm_r50_1x1x8_kinetics400.yaml -w tsm.pth -i videos/ "
         "-o features/ [--snippet 8] [--stride 8] [--workers 4]")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's flags (``-o`` takes the output folder and ``key=value`` config overrides)."""
    parser.add_argument("-c", "--config", required=True, help="the recognizer's YAML config (TSN, TSM, R(2+1)D, ...)")
    parser.add_argument("-w", "--weights", required=True, help="its checkpoint")
    parser.add_argument("-i", "--input", required=True, help="a video file or a folder of videos")
    parser.add_argument("-o", "--opt", dest="values", nargs="+", action="extend", default=[],
                        metavar="OUT_DIR|KEY=VALUE", help="output folder and/or config overrides")
    parser.add_argument("--snippet", type=int, default=None, help="frames per snippet N (default: the frames one "
                        "test sample spans, clip_len x frame_interval x num_clips of the test SampleFrames: 8 for "
                        "TSN/TSM 1x1x8; for a 3D test pipeline of several clips, e.g. R(2+1)D's 10 x 32x2 = 640, "
                        "pass --snippet 64 -o test_dataloader.dataset.pipeline.1.num_clips=1 for one clip per "
                        "snippet)")
    parser.add_argument("--stride", type=int, default=None, help="frames between snippet starts S (default: N)")
    parser.add_argument("--workers", type=int, default=2, help="decoding processes (0: this one; default 2)")
    parser.add_argument("--batch-size", type=int, default=8, help="snippets per model batch (default 8)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")


@dataclass
class Summary:
    """What a run did: ids written, ids skipped (done before), and the unreadable videos."""

    written: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failures: Failures = field(default_factory=lambda: Failures(what="videos"))


def _positive(value: int | None, flag: str) -> None:
    if value is not None and value < 1:
        raise OarsError(f"{flag} must be a positive number of frames, got {value}")


def extract_features(cfg: Config, weights: str, inputs: str, out_dir: str, snippet: int | None = None,
                     stride: int | None = None, workers: int = 0, batch_size: int = 8,
                     device: str = "cpu") -> Summary:
    """Write the snippet features of every video of ``inputs`` into ``out_dir``.

    Args:
        cfg: the recognizer config (overrides applied). weights: its checkpoint.
        inputs: a video file or a folder of videos (not recursive).
        out_dir: the output folder (may not be, hold or lie inside ``inputs``).
        snippet: ``N`` (default :attr:`SnippetPipeline.default_snippet`); stride: ``S`` (default ``N``).
        workers: DataLoader decoding processes. batch_size: snippets per forward. device: the model's device.

    Returns:
        :class:`Summary`; its ``failures`` lists the videos that could not be read (the caller raises them).

    Raises:
        OutputPathError: ``out_dir`` would mix with the inputs (checked before anything is read).
        OarsError: bad numbers, a config whose test pipeline does not read video files, a non-recognizer model,
            an input that is not a video or a folder of videos.
    """
    from oars.pipelines.model import init_model
    from oars_deploy.predictors.clip_classes.cli import list_videos
    from video.features import outputs
    from video.features.clips import SnippetChunks, chunk_loader
    from video.features.pooled import check_recognizer, snippet_outputs
    from video.features.progress import progress_bar
    from video.features.snippets import SnippetPipeline

    check_output_folder(out_dir, inputs)
    for value, flag in ((snippet, "--snippet"), (stride, "--stride"), (batch_size, "--batch-size")):
        _positive(value, flag)
    if workers < 0:
        raise OarsError(f"--workers must be >= 0, got {workers}")
    videos = outputs.video_ids(list_videos(inputs))
    pipeline = SnippetPipeline(cfg)
    snippet = snippet or pipeline.default_snippet
    stride = stride or snippet
    index = outputs.read_index(out_dir)
    summary = Summary()
    done = {vid for vid, _ in videos if outputs.is_done(out_dir, vid, index, snippet, stride)}
    summary.skipped = [vid for vid, _ in videos if vid in done]
    todo = [(vid, path) for vid, path in videos if vid not in done]
    if not todo:
        return summary
    remove_stale_temp_files(out_dir)  # what a killed run's atomic writes left behind
    model = init_model(cfg, weights, device)
    check_recognizer(model, str(cfg.filename))
    bar = progress_bar(len(todo), "extract_features")
    pending: dict[str, list[np.ndarray]] = {}
    pending_scores: dict[str, list[np.ndarray]] = {}
    try:
        for chunk in chunk_loader(SnippetChunks(todo, pipeline, snippet, stride, batch_size),
                                  min(workers, len(todo))):
            if chunk.error is not None:
                pending.pop(chunk.video_id, None)
                pending_scores.pop(chunk.video_id, None)
                summary.failures.add(chunk.path, chunk.error)
            else:
                if chunk.inputs:
                    feats, probs = snippet_outputs(model, chunk.inputs)
                    pending.setdefault(chunk.video_id, []).append(feats)
                    pending_scores.setdefault(chunk.video_id, []).append(probs)
                if not chunk.last:
                    continue
                feats = np.concatenate(pending.pop(chunk.video_id))
                scores = np.concatenate(pending_scores.pop(chunk.video_id)).mean(axis=0)
                outputs.write_scores(out_dir, chunk.video_id, scores)  # before the features: is_done needs both
                outputs.write_features(out_dir, chunk.video_id, feats)
                index[chunk.video_id] = outputs.entry(chunk.info, len(feats), snippet, stride)
                outputs.write_index(out_dir, index)
                summary.written.append(chunk.video_id)
            bar.set_postfix_str(f"{chunk.video_id} ({len(summary.failures)} unreadable)")
            bar.update(1)
    finally:
        bar.close()
    return summary


def run(args: argparse.Namespace) -> Summary:
    """The command: load the config with the ``-o`` overrides, extract, print what was done, then raise the list
    of unreadable videos (``FolderFailuresError``, exit status 2) if any."""
    from oars.cli import split_output_and_overrides
    from oars.config import load_config

    out_dir, overrides = split_output_and_overrides(args.values, None)
    check_output_folder(out_dir, args.input)  # before the config or any video is read
    cfg = load_config(args.config, overrides)
    summary = extract_features(cfg, args.weights, args.input, out_dir, args.snippet, args.stride, args.workers,
                               args.batch_size, args.device)
    print(f"wrote features of {len(summary.written)} videos to {out_dir}"
          + (f" ({len(summary.skipped)} done before, skipped)" if summary.skipped else "")
          + f"; index {osp.join(out_dir, 'videos.json')}")
    summary.failures.raise_if_any(total=len(summary.written) + len(summary.skipped) + len(summary.failures))
    return summary
