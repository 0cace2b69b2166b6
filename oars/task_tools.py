"""The task contract's hooks for the data and result tools, which :class:`oars.tasks.Task` inherits: what
``tools/browse_dataset.py``, ``tools/eval.py --out``, ``tools/eval.py --model-dir`` and ``oars.Model.predict`` ask a
task. Every default raises :class:`oars.errors.OarsError` naming the tool and the task, so a task that does not
implement one is refused with one clear message. Kept apart from :mod:`oars.tasks` so each file has one purpose.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from oars.errors import OarsError

if TYPE_CHECKING:
    import torch
    from mmengine.config import Config


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
