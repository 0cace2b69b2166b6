"""The task contract's hooks for the data and result tools, which :class:`oars.tasks.Task` inherits: what
``tools/browse_dataset.py``, ``tools/eval.py --out``, ``tools/eval.py --model-dir`` and ``oars.Model.predict`` ask a
task, and what ``tools/export.py --int8`` calibrates on. Every default that cannot do the job raises
:class:`oars.errors.OarsError` naming the tool and the task, so a task that does not implement one is refused with
one clear message. Kept apart from :mod:`oars.tasks` so each file has one purpose.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from oars.errors import OarsError

if TYPE_CHECKING:
    import torch
    from mmengine.config import Config

    from oars.export.precision import CalibrationReader
    from oars.export.spec import ExportOptions


class TaskToolHooks:
    """Mixin of :class:`oars.tasks.Task` (which defines ``scope``)."""

    scope: str = ""

    # ---------------------------------------------------------------------------------------- evaluating exports
    #: whether ``tools/eval.py --model-dir`` can evaluate this task's exports (:meth:`prediction_from_export`)
    evaluates_exports: bool = False

    def prediction_from_export(self, result: dict, sample: Any) -> None:
        """Put an export's result for one test image into its data sample, in the fields the task's metrics read
        (what ``tools/eval.py --model-dir`` runs, :class:`oars.models.exported.ExportedModel`).

        Args:
            result: the runtime predictor's dict for the image (``oars_deploy.predictor.Predictor.predict``),
                in original image pixels.
            sample: the test sample (its metainfo holds ``img_path``, ``ori_shape``...), changed in place.

        A task that supports it sets :attr:`evaluates_exports` and overrides this; the default raises.
        """
        raise OarsError(f"tools/eval.py --model-dir: task {self.scope!r} cannot evaluate exported models")

    def export_predictor(self, model_dir: str, device: str, backend: str, model_cfg: dict | None = None) -> Any:
        """The runtime predictor ``tools/eval.py --model-dir`` runs the export folder ``model_dir`` with, built as
        ``oars-infer`` builds it, so the measured accuracy is the deployed model's.

        Args:
            model_dir: the export folder (deploy.yaml + the ONNX file or TensorRT engine).
            device: ``cpu`` or ``cuda``. backend: ``onnxruntime`` or ``tensorrt``.
            model_cfg: the config's ``model`` section the export replaces (a task whose test batches need the
                model's own logic around the graph, e.g. a GAN's seeded noise, builds it; others ignore it).

        Returns:
            An object with ``predict(inputs) -> list[dict]`` (one result per input, in order, taking
            :meth:`export_inputs`' list) and ``deploy`` (the deploy.yaml dict). Default:
            ``oars_deploy.predictor.Predictor`` (image models).

        Raises:
            oars_deploy.errors.DeployError: the folder is not an export this predictor runs (naming it).
        """
        from oars_deploy.predictor import Predictor

        return Predictor(model_dir, device=device, backend=backend)

    def export_inputs(self, samples: list[Any], inputs: Any = None) -> list[Any]:
        """The :meth:`export_predictor` inputs of a batch of test data samples, one per sample: what
        ``oars-infer`` would be given for them. Default: each sample's ``img_path`` read as ``oars-infer`` reads
        it (BGR uint8 [H, W, 3]). ``inputs``: the test batch's packed inputs, before the data preprocessor (the
        default ignores them: the runtime reads and pre-processes the files itself).

        Raises:
            OarsError: a sample names no file, or the file cannot be read (naming it).
        """
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

    # --------------------------------------------------------------------------------- INT8 calibration data
    def calibration_reader(self, cfg: Config, options: ExportOptions) -> CalibrationReader | None:
        """``tools/export.py --int8 --calib-dir DIR``: how DIR's files become the graph's calibration inputs
        (:class:`oars.export.precision.CalibrationReader`), given the config and its export options.

        Returns:
            The reader; the default is the image reader (images through deploy.yaml's ``preprocess``) for a graph
            that takes [B, 3, H, W] images, else None: INT8 is refused for the export with one message.
        """
        from oars.export.precision import IMAGE_READER

        return IMAGE_READER if len(options.input_shape) == 4 else None

    # ------------------------------------------------------------------- tools/browse_dataset.py, eval.py --out
    def draw_pipeline_sample(self, sample: dict, dataset_meta: dict) -> Any:
        """``tools/browse_dataset.py``: a picture of ``dataset[i]`` (``{'inputs', 'data_samples'}`` as
        ``Pack*Inputs`` made it, augmentations applied) with its labels, drawn with ``dataset_meta`` (the
        dataset's ``metainfo``). Returns uint8 BGR [H, W, 3], >= 512 px on its long side so text stays readable.
        The default raises :class:`OarsError` (no pictures for this task)."""
        raise OarsError(f"tools/browse_dataset.py is not available for task {self.scope!r} (its task does not "
                        "implement draw_pipeline_sample)")

    def result_records(self, sample: Any, dataset_meta: dict) -> list[dict]:
        """``tools/eval.py --out``: the JSON records of one predicted test data sample (detection: one COCO result
        per box; other tasks one per sample); the file holds every sample's, in test order. The default raises
        :class:`OarsError`."""
        raise OarsError(f"tools/eval.py --out is not available for task {self.scope!r} (its task does not "
                        "implement result_records)")

    def image_plugin_name(self, cfg: Config) -> str | None:
        """``tools/infer.py`` on a stream (a video file, URL or camera index): the runtime image plug-in
        (``oars_deploy.predictors``) that draws and records :meth:`predict_inputs`' results of ``cfg``'s model,
        frame by frame; read from the config, before the model is built. None (the default): the task's models do
        not predict single images, so ``-i`` is the task's own input (a video for a recognizer)."""
        return None

    def clip_stream_predictor(self, model: torch.nn.Module, cfg: Config) -> Any | None:
        """``tools/infer.py --window N`` on a stream: an object in the runtime ``VideoPredictor``'s role for
        ``oars_deploy.streams.windows.run_windows`` (``sampling``, ``steps``, ``input_shape``, ``batch_size``,
        ``labels``, ``model_dir``, ``infer(batch) -> scores [N, C]``, ``result``) running ``model``. None (the
        default): the task's models do not classify clips of frames."""
        return None

    def predict_inputs(self, model: torch.nn.Module, cfg: Config,
                       inputs: list[tuple[str, Any]]) -> tuple[str, list[dict]]:
        """``oars.Model.predict``: run ``model`` (built from ``cfg``, eval mode) on ``inputs``, ``(name, array)``
        pairs (``array`` BGR uint8 [H, W, 3], or None to read the file ``name``: an image, or a video for a video
        model). Returns (the runtime predictor plug-in's name, one result dict per input in
        ``oars_deploy.predictor.Predictor.predict``'s form, original pixels), so the API draws and records them
        with the plug-in ``oars-infer`` uses; a plug-in without per-image ``draw``/``record`` (not an
        ``ImagePlugin``) gets ``'record'`` (its ``ResultRecord``) and ``'picture'`` (BGR uint8) in each dict.
        The default raises :class:`OarsError`."""
        raise OarsError(f"oars.Model.predict is not available for task {self.scope!r} (its task does not "
                        "implement predict_inputs; use tools/infer.py)")
