"""The roles of the task contract (:mod:`oars.tasks`), in the spirit of ultralytics' ``task_map``: what a kind of model
exports (:class:`Exporter`), how it predicts (:class:`Predictor`), what the data tools ask of it (:class:`Data`), and
what a task adds to the tools (:class:`Commands`). A task gives one :class:`Exporter` / :class:`Predictor` /
:class:`Data` per kind of model (:class:`oars.tasks.ModelKind`) and one :class:`Commands`.

Every default either does the image model's job or raises :class:`oars.errors.OarsError` naming the tool and the
task, so a role that does not implement a method is refused with one clear message. This module imports nothing
heavy and calls nothing above it: the exporter's image defaults live in the exporter
(:mod:`oars.export.options`), which uses them when a role returns None.
"""

from __future__ import annotations

import abc
import argparse
from typing import TYPE_CHECKING, Any

from oars.errors import OarsError
from oars.subcommands import Subcommand

if TYPE_CHECKING:
    import torch
    from mmengine.config import Config

    from oars.config.description_file import DataDescription
    from oars.export.precision import CalibrationReader
    from oars.export.spec import ExportOptions, ExportSpec
    from oars_deploy.failures import Failures

# what ``parser.add_argument_group()`` returns as well as a parser: both take ``add_argument``
ArgumentContainer = argparse._ActionsContainer

class _Role:
    """What every role knows: the scope of its task, for messages (set by :class:`oars.tasks.Task`)."""

    scope: str = ""


class Exporter(_Role, abc.ABC):
    """How a kind of model is exported (``tools/export.py``, always through the core exporter) and how its exports
    are evaluated (``tools/eval.py --model-dir``). Abstract: :meth:`build_export_spec`."""

    @abc.abstractmethod
    def build_export_spec(self, model: torch.nn.Module, cfg: Config, options: ExportOptions) -> ExportSpec:
        """What the core exporter traces and writes: the module (in eval mode after this), its named inputs and
        outputs, deploy.yaml's ``outputs``/``postprocess`` (and more sections), and how the self-check compares
        ONNX Runtime with PyTorch (``ExportSpec.compare``, ``atol``, ``sample_inputs``).

        Args:
            model: the model built from ``cfg`` with the checkpoint loaded (``oars.pipelines.model.init_model``).
            cfg: the resolved config.
            options: what :meth:`export_options` made of the user's flags and ``cfg.export``.

        Raises:
            oars.export.ExportError: a model or config that cannot be exported, naming the config and the fix.
        """

    def export_options(self, cfg: Config, dynamic: bool, opset: int) -> ExportOptions | None:
        """The export's fixed input shape and options from ``cfg.export`` (called before the model is built). None
        (the default): the exporter reads an image model's ``export.input_shape`` ``[B, 3, H, W]`` itself
        (:func:`oars.export.options.task_export_options`). A kind whose input is not one image overrides it."""
        return None

    def preprocess_steps(self, cfg: Config) -> list[dict] | None:
        """deploy.yaml's ``preprocess`` steps from the config's test pipeline (called before the model is built).
        None (the default): the exporter derives an image pipeline's steps (:func:`oars.export.options.
        task_preprocess_steps`)."""
        return None

    def check_export(self, cfg: Config, fmt: str, precision: str) -> None:
        """Refuse an export this kind cannot make (``fmt``: ``onnx``/``tensorrt``; ``precision``: ``fp32``,
        ``fp16``, ``int8``) before the model is built, raising :class:`oars.export.ExportError`. Default: accept."""
        return None

    def export_arguments(self, parser: ArgumentContainer) -> None:
        """Add the task's own ``tools/export.py`` flags (each ``default=None``; given values reach
        :meth:`export_options` / :meth:`build_export_spec` in ``ExportOptions.extra`` under their ``dest``). The
        tool asks the task's default kind (the flags are the task's). Default: none."""
        return None

    def calibration_reader(self, cfg: Config, options: ExportOptions) -> CalibrationReader | None:
        """``tools/export.py --int8 --calib-dir DIR``: how DIR's files become the graph's calibration inputs. The
        default: the image reader (images through deploy.yaml's ``preprocess``) for a graph that takes
        [B, 3, H, W] images, else None (INT8 is refused with one message)."""
        from oars.export.precision import IMAGE_READER

        return IMAGE_READER if len(options.input_shape) == 4 else None

    # ----------------------------------------------------------------------------- tools/eval.py --model-dir
    #: whether ``tools/eval.py --model-dir`` can evaluate this kind's exports (:meth:`prediction_from_export`)
    evaluates_exports: bool = False

    def export_predictor(self, model_dir: str, device: str, backend: str, model_cfg: dict | None = None) -> Any:
        """The runtime predictor the export folder ``model_dir`` is evaluated with, built as ``oars-infer`` builds
        it: an object with ``predict(inputs) -> list[dict]`` and ``deploy`` (the deploy.yaml dict). ``model_cfg``:
        the config's ``model`` section the export replaces (a GAN's seeded noise needs it). Default:
        ``oars_deploy.predictor.Predictor`` (image models); raises ``DeployError`` for a folder it cannot run."""
        from oars_deploy.predictor import Predictor

        return Predictor(model_dir, device=device, backend=backend)

    def export_inputs(self, samples: list[Any], inputs: Any = None) -> list[Any]:
        """The :meth:`export_predictor` inputs of a batch of test data samples, one per sample. Default: each
        sample's ``img_path`` read as ``oars-infer`` reads it (BGR uint8 [H, W, 3]); ``inputs`` (the batch's packed
        inputs) ignored. Raises :class:`OarsError` for a sample without a readable file."""
        from oars_deploy.errors import DeployError
        from oars_deploy.outputs import read_image

        images = []
        for sample in samples:
            path = sample.metainfo.get("img_path")
            if not path:
                raise OarsError("--model-dir: a test sample has no img_path; the export is evaluated on the image "
                                "files, so the test dataset must list them")
            try:
                images.append(read_image(path))
            except DeployError as err:
                raise OarsError(f"--model-dir: {err}") from None
        return images

    def prediction_from_export(self, result: dict, sample: Any) -> None:
        """Put an export's result for one test input (the runtime predictor's dict, original pixels) into its data
        sample, in the fields the metrics read. Set :attr:`evaluates_exports` and override; the default raises."""
        raise OarsError(f"tools/eval.py --model-dir: task {self.scope!r} cannot evaluate exported models")


class Predictor(_Role, abc.ABC):
    """How a kind of model predicts with PyTorch: one :meth:`predict`, which serves ``oars.Model.predict``,
    ``tools/infer.py`` on images and image streams (through the runtime plug-in :attr:`image_plugin`, the PyTorch
    model in the export's place: :mod:`oars.pipelines.infer`) and clip windows over a stream
    (:meth:`runtime_predictor`). A kind whose model does not predict single images (videos, noise) reads its own
    input in :meth:`infer`. A kind implements :meth:`predict` (image kinds: nothing else) or :meth:`infer` (its
    input is its own), or both."""

    #: the runtime image plug-in that draws, records and writes :meth:`predict`'s results (``tools/infer.py`` on a
    #: file, a folder or a stream, ``oars.Model.predict`` on a video); None: this kind does not predict single
    #: images, so its input is its own (:meth:`infer`). A declaration, not a hook: a task whose models differ here
    #: registers two kinds.
    image_plugin: str | None = None

    def infer_arguments(self, parser: ArgumentContainer) -> None:
        """Add the kind's own ``tools/infer.py`` flags (each ``default=None``); the tool asks the task's default
        kind. Default: the :attr:`image_plugin`'s own ``oars-infer`` flags (e.g. ``--draw-threshold``), so a
        checkpoint and its export take the same ones; none without a plug-in."""
        if self.image_plugin is not None:
            from oars_deploy.plugins import get_predictor

            get_predictor(self.image_plugin).add_arguments(parser)

    def requires_input(self, cfg: Config) -> bool:
        """Whether ``tools/infer.py`` needs ``-i`` (False for a model that makes pictures from nothing)."""
        return True

    def predict(self, model: torch.nn.Module, cfg: Config, inputs: list[tuple[str, Any]]) -> tuple[str, list[dict]]:
        """Run ``model`` (eval mode) on ``(name, array)`` pairs (BGR uint8 [H, W, 3], or None to read the file
        ``name``). Returns (the runtime plug-in's name, one result per input in
        ``oars_deploy.predictor.Predictor.predict``'s form: original pixels); a plug-in without per-image
        ``draw``/``record`` gets ``'record'`` and ``'picture'`` in each dict.

        Serves ``oars.Model.predict`` and, for a kind with an :attr:`image_plugin`, ``tools/infer.py`` on images
        and streams (:class:`oars.pipelines.infer.TorchFramePredictor` wraps it in the runtime predictor's role).
        The default raises."""
        raise OarsError(f"oars.Model.predict is not available for task {self.scope!r} (its predictor does not "
                        "implement predict; use tools/infer.py)")

    def runtime_predictor(self, model: torch.nn.Module, cfg: Config) -> Any | None:
        """``model`` in the role of the runtime plug-in's own predictor where :meth:`predict`'s form is not the one
        that plug-in runs (``tools/infer.py --window N``: a clip classifier's ``VideoPredictor``, fed pre-processed
        windows by ``oars_deploy.streams.windows.run_windows``). None (the default): nothing beyond
        :meth:`predict` (image kinds are wrapped by the pipeline)."""
        return None

    def infer(self, cfg: Config, weights: str, inputs: str | None, output: str, *, device: str,
              failures: Failures, args: argparse.Namespace) -> list[str]:
        """``tools/infer.py`` for a kind without an :attr:`image_plugin` (its input is its own: videos, feature
        files, nothing for a noise generator): predict ``inputs`` (a file or folder; None only when
        :meth:`requires_input` said so) with ``cfg`` + ``weights`` on ``device``, write the pictures and result files
        under ``output``, record an unreadable input in ``failures`` and go on; ``args`` holds
        :meth:`infer_arguments`' flags. Returns the pictures' paths. The default raises."""
        raise OarsError(f"tools/infer.py is not available for task {self.scope!r} (its predictor has neither an "
                        "image_plugin nor an infer)")


class Data(_Role):
    """What the data and result tools ask of a kind of model: dataset checks at build time, the browse pictures,
    ``tools/eval.py --out``'s records and ``--report``'s hook."""

    def check_dataset(self, cfg: Config, split: str, dataset: Any) -> None:
        """Fail at build time (an :class:`OarsError` naming the config and the keys) when a lazily built dataset of
        ``split`` disagrees with the model or the evaluators in a way only this task knows. Default: no check."""
        return None

    def draw_pipeline_sample(self, sample: dict, dataset_meta: dict) -> Any:
        """``tools/browse_dataset.py``: a picture (uint8 BGR [H, W, 3], >= 512 px on its long side) of one packed
        pipeline sample with its labels. The default raises."""
        raise OarsError(f"tools/browse_dataset.py is not available for task {self.scope!r} (its task does not "
                        "implement draw_pipeline_sample)")

    def result_records(self, sample: Any, dataset_meta: dict) -> list[dict]:
        """``tools/eval.py --out``: the JSON records of one predicted test data sample. The default raises."""
        raise OarsError(f"tools/eval.py --out is not available for task {self.scope!r} (its task does not "
                        "implement result_records)")

    def report_hook(self, cfg: Config, out_file: str) -> dict:
        """The hook config ``tools/eval.py --report`` adds to write ``out_file``; default: the scope's registered
        ``EvaluationReportHook``."""
        return {"type": "EvaluationReportHook", "out_file": out_file}

    #: the dataset description formats (``format:`` of a ``--data`` file) :meth:`dataset_from_description` reads,
    #: for the message that refuses another one
    description_formats: tuple[str, ...] = ()

    def dataset_from_description(self, description: DataDescription, split: str) -> dict | None:
        """``--data`` / ``data=``: the dataset config of ``split`` (``train``, ``val``, ``test``) for the data set
        ``description`` describes: ``type`` and the keys that say where the data is and which classes it has
        (root, annotation files, folders, ``classes`` from ``description.names``). The core keeps the config's
        other dataset keys (pipeline, test_mode, ...) that the type accepts, and sets the model's ``num_classes``.
        Resolve paths with ``description.resolve`` (its errors name the file and key). None (the default): the
        format is not one this kind reads."""
        return None


class Commands(_Role):
    """What a task adds to the tools, whatever the kind of model: its subcommands and its hub converters."""

    def subcommands(self) -> list[Subcommand]:
        """The commands the task adds to ``tools/*.py`` entry points (converters, data checks, demo data)."""
        return []

    def hub_converters(self) -> dict[str, str | tuple[str, dict[str, Any]]]:
        """The hub converters (``oars/hub/*.yaml``'s ``converter``) the task owns: name -> ``"module:function"``
        (imported when first used), or ``("module:function", {keyword: value})`` with arguments bound to every
        call. :mod:`oars.hub.converters` asks the registered tasks for them when a name is looked up."""
        return {}
