"""``tools/infer.py`` in-process with the PyTorch model: a file or a folder of images (:func:`infer_images`), or a
stream (:func:`infer_stream`: a video file, a URL FFmpeg opens or a camera index as ``-i`` for a model that predicts
single images, or ``--window N`` over it for a clip classifier).

Why through the runtime: ``oars-infer`` already reads folders and streams (its image plug-ins: batches, unreadable
files listed, unique output names, per-image pictures and records; :mod:`oars_deploy.streams`: PyAV decoding,
``--every``, ``--max-frames``, ``--track``, per-frame records with their time, the annotated H.264 video). The
PyTorch model takes the runtime predictor's place (:class:`TorchFramePredictor`: the same ``predict(images) ->
results`` in the runtime's form, from the predictor role's one ``predict``), so the images are read, drawn,
recorded and written by the same code for an export and for a checkpoint, and the two outputs can be compared
line by line.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from oars.errors import OarsError
from oars.pipelines.model import init_model
from oars.task_roles import Predictor
from oars.tasks import Task


class TorchFramePredictor:
    """A PyTorch model in the runtime image predictor's role for :func:`oars_deploy.streams.run.run_stream`.

    Args:
        model: the model (eval mode) with its weights. cfg: its config. role: the predictor role of its kind.
        batch_size: images per model call; None: any number (a stream's ``--batch-size``, else 8).

    Attributes:
        labels: class names (the checkpoint's ``dataset_meta``, else the config's). palette: one RGB per class.
        batch_size: as given.
    """

    def __init__(self, model: Any, cfg: Any, role: Predictor, batch_size: int | None = None) -> None:
        from oars_deploy.draw import get_palette

        self.model, self.cfg, self.role = model, cfg, role
        meta = getattr(model, "dataset_meta", None) or {}
        count = int(getattr(model, "num_classes", 0) or 0)
        self.labels: list[str] = list(meta.get("classes") or [str(i) for i in range(count)])
        self.palette = get_palette(len(self.labels), meta.get("palette"))
        self.batch_size = batch_size

    def predict(self, images: list[np.ndarray]) -> list[dict]:
        """One result per BGR uint8 ``[H, W, 3]`` image, in the runtime predictor's form and original pixels
        (the predictor role's ``predict``)."""
        _, results = self.role.predict(self.model, self.cfg, [(f"frame_{i}", img) for i, img in enumerate(images)])
        return results


def infer_images(task: Task, cfg: Any, weights: str, inputs: str, output: str, *, device: str = "cpu",
                 flags: dict[str, Any] | None = None, failures: Any = None) -> Any:
    """``tools/infer.py -i FILE_OR_FOLDER`` for a kind that predicts single images: every image of ``inputs``
    through the runtime plug-in of the kind's predictor role (``image_plugin``: batches of one, pictures, records,
    compatibility files such as detections.json) with the checkpoint in the export's place, plus ``results.jsonl``.

    Args:
        task: ``cfg``'s task (the predictor role of ``cfg``'s kind has an ``image_plugin``). cfg: the loaded config.
        weights: the checkpoint. inputs: an image file or a folder. output: the output folder (never one of the
            inputs: checked before anything is loaded). device: ``cpu`` or ``cuda``.
        flags: the plug-in's flags that were given (e.g. ``draw_threshold``).
        failures: an ``oars_deploy.failures.Failures`` that unreadable images are added to; None: their summary is
            raised (``FolderFailuresError``) after everything readable was written.

    Returns:
        The runtime's ``PredictorRun``: ``records`` (one per image written), ``pictures`` (their paths), ``total``.

    Raises:
        UserError: the runtime's refusals as they are (an output name collision: ``OutputPathError``; an input
            that is not an image or a folder of them: ``DeployError``), one message each.
    """
    from tqdm import tqdm

    from oars_deploy.output_paths import check_output_folder
    from oars_deploy.plugins import get_predictor
    from oars_deploy.records import write_results

    check_output_folder(output, inputs)  # outputs never replace inputs: before the config or the model is read
    role = task.predictor(cfg)
    if role.image_plugin is None:
        raise OarsError(f"{cfg.filename}: this kind of model does not predict single images")
    plugin = get_predictor(role.image_plugin)
    args = argparse.Namespace(input=inputs, output_dir=output, batch_size=None, every=1, max_frames=None,
                              benchmark=False, **{"draw_threshold": None, **(flags or {})})
    plugin.output_stems(plugin.list_inputs(inputs))  # a name collision is told before the model loads
    model = init_model(cfg, weights, device)
    # batches of one: each image is predicted at its own size, never padded to a neighbour's
    run = plugin.run_with(TorchFramePredictor(model, cfg, role, batch_size=1), args,
                          progress=lambda total: tqdm(total=total, desc="infer"))
    write_results(run.records, output)
    if failures is None:
        run.failures.raise_if_any(total=run.total)
    else:
        for path, reason in run.failures.items:
            failures.add(path, reason)
    return run


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
        return run_stream(plugin, TorchFramePredictor(model, cfg, task.predictor(cfg)), args, source)
    except DeployError as err:
        raise OarsError(str(err)) from None


def _clip_windows(task: Task, cfg: Any, weights: str, source: Any, args: argparse.Namespace,
                  device: str) -> Any | None:
    """``--window N``: the task's clip classifier (``Predictor.runtime_predictor``) window by window over the stream
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
    predictor = task.predictor(cfg).runtime_predictor(model, cfg)
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
