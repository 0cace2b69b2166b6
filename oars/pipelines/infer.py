"""``tools/infer.py`` in-process on a stream: a video file, a URL FFmpeg opens or a camera index as ``-i`` for a
model that predicts single images (detection, instance and semantic segmentation), with the PyTorch model.

Why through the runtime: ``oars-infer`` already reads streams (:mod:`oars_deploy.streams`: PyAV decoding, ``--every``,
``--max-frames``, ``--track``, per-frame records with their time, the annotated H.264 video). The PyTorch model
takes the runtime predictor's place (:class:`TorchFramePredictor`: the same ``predict(images) -> results`` in the
runtime's form, from ``Predictor.predict``), so the frames are read, drawn, recorded and written by the
same code for an export and for a checkpoint, and the two outputs can be compared line by line.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from oars.errors import OarsError
from oars.pipelines.model import init_model
from oars.tasks import Task


class TorchFramePredictor:
    """A PyTorch model in the runtime image predictor's role for :func:`oars_deploy.streams.run.run_stream`.

    Attributes:
        labels: class names (the checkpoint's ``dataset_meta``, else the config's). palette: one RGB per class.
        batch_size: None (any number of frames per call).
    """

    def __init__(self, model: Any, cfg: Any, task: Task) -> None:
        from oars_deploy.draw import get_palette

        self.model, self.cfg, self.task = model, cfg, task
        meta = getattr(model, "dataset_meta", None) or {}
        count = int(getattr(model, "num_classes", 0) or 0)
        self.labels: list[str] = list(meta.get("classes") or [str(i) for i in range(count)])
        self.palette = get_palette(len(self.labels), meta.get("palette"))
        self.batch_size: int | None = None

    def predict(self, images: list[np.ndarray]) -> list[dict]:
        """One result per BGR uint8 ``[H, W, 3]`` frame, in the runtime predictor's form and original pixels
        (the predictor role's ``predict``)."""
        _, results = self.task.predictor(self.cfg).predict(self.model, self.cfg, [(f"frame_{i}", img)
                                                                             for i, img in enumerate(images)])
        return results


def stream_plugin(task: Task, cfg: Any) -> Any | None:
    """The runtime image plug-in that draws and records the per-image results of ``cfg``'s model, or None when the
    task's models do not predict single images (then ``-i`` is the task's own input, e.g. a video for a
    recognizer)."""
    from oars_deploy.plugins import get_predictor

    name = task.predictor(cfg).image_plugin
    return None if name is None else get_predictor(name)


def add_stream_arguments(parser: argparse.ArgumentParser) -> None:
    """The stream flags ``tools/infer.py`` shares with ``oars-infer`` (``--every``, ``--max-frames``,
    ``--batch-size``, ``--track`` and its parameters, ``--window`` / ``--stride``)."""
    from oars_deploy.track.options import add_track_arguments

    group = parser.add_argument_group("streams (-i a video file, a URL or a camera index for an image model)")
    group.add_argument("--every", type=int, default=1, help="predict every N-th frame (default 1)")
    group.add_argument("--max-frames", type=int, default=None, help="stop after this many frames")
    group.add_argument("--batch-size", type=int, default=None,
                       help="frames per model call (default: 1 for a camera or URL, 8 for a file)")
    add_track_arguments(group)
    group.add_argument("--window", type=int, default=None,
                       help="clip classifiers: classify the last N frames of the stream, one record per window")
    group.add_argument("--stride", type=int, default=None,
                       help="--window: frames between the ends of two windows (default: the window, no overlap)")


def infer_stream(task: Task, cfg: Any, weights: str, source: Any, output: str, args: argparse.Namespace,
                 device: str = "cpu") -> Any | None:
    """Predict the stream ``source`` with the checkpoint ``weights`` into ``output`` (records + annotated video).

    Args:
        task: the config's task. cfg: the loaded config. weights: the checkpoint. source: an
            :class:`oars_deploy.streams.source.StreamSource`. output: the output folder. args: the tool's arguments
            (the stream flags, ``draw_threshold`` where the task has it). device: ``cpu`` or ``cuda``.

    Returns:
        The runtime's ``PredictorRun`` (one record per predicted frame), or None when the model does not predict
        single images (the caller then reads ``-i`` as the task's own input).

    Raises:
        OarsError: a stream flag that does not fit (``--track`` on a segmenter, ``--every 0``...), naming it.
    """
    from oars_deploy.errors import DeployError
    from oars_deploy.output_paths import check_output_folder
    from oars_deploy.streams.options import check_stream_flags
    from oars_deploy.streams.run import run_stream

    # outputs never replace inputs: the rule every tool that writes follows (a task's infer checks it itself)
    check_output_folder(output, source.location if source.kind == "file" else None)
    plugin = stream_plugin(task, cfg)
    args = argparse.Namespace(**{"draw_threshold": None, "topk": 5, **vars(args), "output_dir": output})
    if plugin is None:
        return _clip_windows(task, cfg, weights, source, args, device)
    try:
        check_stream_flags(args, plugin)
        model = init_model(cfg, weights, device)
        return run_stream(plugin, TorchFramePredictor(model, cfg, task), args, source)
    except DeployError as err:
        raise OarsError(str(err)) from None


def _clip_windows(task: Task, cfg: Any, weights: str, source: Any, args: argparse.Namespace,
                  device: str) -> Any | None:
    """``--window N``: the task's clip classifier (``Predictor.clip_stream_predictor``) window by window over the stream
    (:func:`oars_deploy.streams.windows.run_windows`); None without ``--window`` (the stream is the task's own
    input, e.g. a whole video for a recognizer)."""
    from oars_deploy.errors import DeployError
    from oars_deploy.streams.windows import run_windows

    if getattr(args, "window", None) is None:
        if getattr(args, "stride", None) is not None:
            raise OarsError("--stride applies to --window (sliding-window clip classification)")
        return None
    if getattr(args, "track", False):
        raise OarsError("--track applies to detection models, not to clip classifiers")
    model = init_model(cfg, weights, device)
    predictor = task.predictor(cfg).clip_stream_predictor(model, cfg)
    if predictor is None:
        raise OarsError(f"--window applies to clip classifiers; {cfg.filename} is not one")
    try:
        return run_windows(args, source, predictor)
    except DeployError as err:
        raise OarsError(str(err)) from None


def refuse_stream_flags(args: argparse.Namespace, why: str) -> None:
    """Raise an :class:`OarsError` naming the first stream flag given (``--every`` other than 1, ``--max-frames``,
    ``--batch-size``, ``--track`` or a ``--track-*`` parameter) where no stream is read (``why``)."""
    from oars_deploy.track.options import TRACK_FLAGS

    given = [flag for flag, value, default in (("--every", getattr(args, "every", 1), 1),
                                               ("--max-frames", getattr(args, "max_frames", None), None),
                                               ("--batch-size", getattr(args, "batch_size", None), None),
                                               ("--track", getattr(args, "track", False), False),
                                               ("--window", getattr(args, "window", None), None),
                                               ("--stride", getattr(args, "stride", None), None))
             if value != default]
    given += [flag for flag, key in TRACK_FLAGS.items() if getattr(args, key, None) is not None]
    if given:
        raise OarsError(f"{given[0]} applies to streams (-i a video file, a URL or a camera index for a model that "
                        f"predicts images); {why}")
