"""What the image plug-ins share (``detection_boxes``, ``instance_masks``, ``semantic_labels``): the loop over a
folder of images in batches, the unreadable-file handling and ``--benchmark``.

A plug-in adds its post-processing (:meth:`ImagePlugin.postprocess`), the pictures and record of one image
(:meth:`ImagePlugin.write`) and what is written once at the end (:meth:`ImagePlugin.finish`, e.g. detections.json).

Output names: :meth:`ImagePlugin.output_stems` gives every input a unique name (the rule of
:func:`oars_deploy.output_paths.output_stems`: the path below the inputs' common folder, the suffix added when two
files of a folder share a stem), used by ``oars-infer`` over a folder and by ``oars-infer --ray`` alike.
"""

from __future__ import annotations

import argparse
import inspect
import os
import os.path as osp
from abc import abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

import cv2
import numpy as np

from oars_deploy.deploy_config import validate_image_input
from oars_deploy.errors import DeployError
from oars_deploy.failures import Failures
from oars_deploy.image_files import list_images
from oars_deploy.output_paths import output_stems
from oars_deploy.outputs import read_image
from oars_deploy.plugins import PredictorPlugin, PredictorRun
from oars_deploy.predictor import Predictor
from oars_deploy.records import ResultRecord
from oars_deploy.streams.run import run_stream
from oars_deploy.streams.source import stream_source
from oars_deploy.words import plural


def image_task(deploy: dict) -> str | None:
    """The image task an export without ``predictor`` was written for: ``model.task`` when it is 'detection' or
    'segmentation', else ``postprocess.type`` (the post-processing the predictor runs); None when neither says."""
    model = deploy.get("model") if isinstance(deploy.get("model"), dict) else {}
    post = deploy.get("postprocess") if isinstance(deploy.get("postprocess"), dict) else {}
    task = model.get("task")
    return task if task in ("detection", "segmentation") else post.get("type")


def read_batch(paths: list[str], failures: Failures) -> tuple[list[str], list[np.ndarray]]:
    """The images of ``paths`` that can be read (and their paths); the others go to ``failures``."""
    kept, images = [], []
    for path in paths:
        try:
            images.append(read_image(path))
        except DeployError as err:
            failures.add(path, str(err))
            continue
        kept.append(path)
    return kept, images


def print_benchmark(stats: dict[str, float], device: str, backend: str) -> None:
    """The ``--benchmark`` table: median / p90 latency and images/s, end to end and of the model call alone."""
    print(f"benchmark ({backend}, {device}, batch {int(stats['batch'])}, {int(stats['runs'])} runs):")
    print(f"  {'':<12} {'median ms':>10} {'p90 ms':>10} {'images/s':>10}")
    for name in ("end_to_end", "model"):
        print(f"  {name:<12} {stats[f'{name}_median_ms']:>10.2f} {stats[f'{name}_p90_ms']:>10.2f} "
              f"{stats[f'{name}_images_per_s']:>10.1f}")


class ImagePlugin(PredictorPlugin):
    """A model fed one BGR image per input ([B, 3, H, W] after deploy.yaml's steps), run by
    :class:`oars_deploy.predictor.Predictor`."""

    #: run the post-processing with the array module (CuPy on the GPU) rather than NumPy
    array_postprocess: ClassVar[bool] = False
    #: the files :meth:`write` makes per image, as templates of its ``stem`` (:meth:`output_stems` keeps them unique)
    output_names: ClassVar[tuple[str, ...]] = ("{stem}_vis.png",)

    def validate(self, deploy: dict, path: str) -> None:
        """An image input and image pre-processing steps (``oars_deploy.deploy_config``)."""
        validate_image_input(deploy, path)

    @abstractmethod
    def postprocess(self, outputs: dict[str, Any], metas: list[dict], post: dict) -> list[dict]:
        """Model outputs of a batch -> one result dict per image (original pixels); see
        :mod:`oars_deploy.predictor`."""

    def check_args(self, args: argparse.Namespace, deploy: dict) -> None:
        """Refuse the flags that do not fit this kind (before the model is loaded)."""

    def draw(self, img: np.ndarray, result: dict, predictor: Any, args: argparse.Namespace) -> np.ndarray:
        """The picture of one image's result: HxWx3 uint8 BGR (``<stem>_vis.png``, or a frame of a stream's
        annotated video). A plug-in written before this split (overriding :meth:`write` only) still predicts
        images; streams and the Python API need this and :meth:`record`, and say so."""
        raise DeployError(f"predictor {self.name!r} draws only through write(): it cannot annotate a stream's frames "
                          "(implement draw() and record())")

    def record(self, out_dir: str, path: str, stem: str, img: np.ndarray, result: dict,
               predictor: Any) -> ResultRecord:
        """One image's record, writing what it refers to into ``out_dir`` under ``stem`` (e.g. a label PNG). The
        default writes nothing and returns :meth:`result_record`."""
        return self.result_record(path, stem, img, result, predictor)

    def result_record(self, path: str, stem: str, img: np.ndarray, result: dict, predictor: Any) -> ResultRecord:
        """One image's record without writing anything (``oars-serve`` answers it; :meth:`record` writes the files
        it names). The default raises: a plug-in written before this split records only through write()."""
        raise DeployError(f"predictor {self.name!r} records only through write(): it cannot record a stream's "
                          "frames or answer a server request (implement draw() and result_record())")

    def write(self, out_dir: str, path: str, img: np.ndarray, result: dict, predictor: Any,
              args: argparse.Namespace, stem: str | None = None) -> tuple[str, ResultRecord]:
        """Write one image's ``<stem>_vis.png`` (:meth:`draw`) into ``out_dir``; return its path and the record.

        Args:
            stem: the output name without suffix, relative to ``out_dir`` (:meth:`output_stems`; ``a/x`` writes
                into the subfolder ``a``); None: the file's own stem.
        """
        stem = osp.splitext(osp.basename(path))[0] if stem is None else stem
        out = osp.join(out_dir, f"{stem}_vis.png")
        os.makedirs(osp.dirname(out), exist_ok=True)
        if not cv2.imwrite(out, self.draw(img, result, predictor, args)):
            raise DeployError(f"could not write {out}")
        return out, self.record(out_dir, path, stem, img, result, predictor)

    def takes_stem(self) -> bool:
        """Whether :meth:`write` takes the output ``stem`` (a plug-in written before it did names its files after
        the input's own stem: then :meth:`output_stems` refuses two inputs sharing a stem)."""
        return "stem" in inspect.signature(self.write).parameters

    def output_stems(self, paths: list[str], input_flag: str = "-i") -> dict[str, str]:
        """``{path: stem}``: the unique output name of each input (:func:`oars_deploy.output_paths.output_stems`
        with :attr:`output_names`).

        Raises:
            OutputPathError: two inputs would write the same file; the message names both.
        """
        if self.takes_stem():
            return output_stems(paths, self.output_names, input_flag=input_flag)
        return output_stems(paths, ("{stem}",), nested=False, input_flag=input_flag)

    def write_named(self, out_dir: str, path: str, stem: str, img: np.ndarray, result: dict, predictor: Any,
                    args: argparse.Namespace) -> tuple[str, ResultRecord]:
        """:meth:`write` under the name :meth:`output_stems` gave ``path`` (an older ``write`` without ``stem``
        is called as it is: its stems are the files' own, checked unique)."""
        if self.takes_stem():
            return self.write(out_dir, path, img, result, predictor, args, stem=stem)
        return self.write(out_dir, path, img, result, predictor, args)

    def served_model(self) -> type:
        """:class:`oars_deploy.serve.models.ImageModel` (the server's run of :class:`Predictor`)."""
        from oars_deploy.serve.models import ImageModel

        return ImageModel

    def finish(self, out_dir: str, records: list[ResultRecord], predictor: Any) -> None:
        """Write what covers every image (after the last one), e.g. detections.json."""

    def run(self, args: argparse.Namespace, deploy: dict) -> PredictorRun:
        """Predict every image of ``args.input`` with the export of ``args.model_dir``
        (:class:`oars_deploy.predictor.Predictor`): :meth:`run_with`."""
        self.check_args(args, deploy)
        predictor = Predictor(args.model_dir, device=args.device, backend=args.backend,
                              array_module_name=args.array_module)
        return self.run_with(predictor, args)

    def run_with(self, predictor: Any, args: argparse.Namespace,
                 progress: Callable[[int], Any] | None = None) -> PredictorRun:
        """Predict every image of ``args.input`` in batches with ``predictor``; unreadable images are listed, the
        others written. A video file, URL or camera index is read as a stream (:mod:`oars_deploy.streams.run`).

        Why the predictor is a parameter: ``tools/infer.py`` runs a checkpoint through this same loop (the PyTorch
        model in the predictor's role), so an export and its checkpoint write the same files by the same code.

        Args:
            predictor: an object with ``predict(images) -> list[dict]`` (BGR uint8 [H, W, 3] in, one result per
                image in this plug-in's form), ``labels``, ``palette`` and ``batch_size`` (None: any).
            args: ``input``, ``output_dir``, ``batch_size``, the stream flags and this plug-in's flags.
            progress: ``progress(total)`` -> an object with ``update(n)`` and ``close()`` (e.g. ``tqdm``), told
                of every image handled; None: no progress bar (the runtime has none of its own).
        """
        if args.batch_size is not None and args.batch_size < 1:
            raise DeployError(f"--batch-size must be >= 1, got {args.batch_size}")
        source = stream_source(args.input)
        if source is not None:  # a video file, a URL or a camera: frame by frame into a video
            return run_stream(self, predictor, args, source)
        for flag, value, default in (("--every", getattr(args, "every", 1), 1),
                                     ("--max-frames", getattr(args, "max_frames", None), None)):
            if value != default:
                raise DeployError(f"{flag} applies to streams (-i a video file, a URL or a camera index), not to "
                                  f"images: -i {args.input}")
        batch_size = args.batch_size or predictor.batch_size or 8
        paths = list_images(args.input)
        stems = self.output_stems(paths)  # before any image is read: a name collision is told at once
        os.makedirs(args.output_dir, exist_ok=True)
        failures = Failures()
        written: list[str] = []
        records: list[ResultRecord] = []
        first: list[np.ndarray] = []
        bar = progress(len(paths)) if progress is not None else None
        try:
            for start in range(0, len(paths), batch_size):
                chunk, images = read_batch(paths[start:start + batch_size], failures)
                if images:
                    first = first or images
                    for path, img, result in zip(chunk, images, predictor.predict(images)):
                        out, record = self.write_named(args.output_dir, path, stems[path], img, result, predictor,
                                                       args)
                        written.append(out)
                        records.append(record)
                if bar is not None:
                    bar.update(len(paths[start:start + batch_size]))
        finally:
            if bar is not None:
                bar.close()
        self.finish(args.output_dir, records, predictor)
        print(f"wrote {plural(len(written), 'picture')} to {args.output_dir}")
        if getattr(args, "benchmark", False) and first:
            print_benchmark(predictor.benchmark(first, args.warmup, args.runs), args.device, args.backend)
        return PredictorRun(records=records, failures=failures, total=len(paths), pictures=written)
