"""An export folder as a model the Runner can test: ``tools/eval.py --model-dir EXPORT_DIR -c CFG``.

Why: an export is what runs in production (FP32, FP16, INT8, pruned), and its accuracy is what matters there —
``mmdeploy``'s ``test.py`` and ``yolo val model=x.onnx`` measure it the same way. Running it inside the ordinary test
loop means the same dataset, evaluator, metrics.json, ``--report`` and ``--show-dir`` as the PyTorch evaluation, with
only the model swapped: each batch's original files (images, videos...) go through the torch-free runtime predictor
exactly as ``oars-infer`` runs them (deploy.yaml's pre-processing, ONNX Runtime or TensorRT, the runtime's
post-processing), and the task turns each result into its data sample's prediction fields. The exporter role of the
config's kind of model says which predictor and which inputs (:meth:`oars.task_roles.Exporter.export_predictor`,
:meth:`~oars.task_roles.Exporter.export_inputs`; images through ``oars_deploy.predictor.Predictor`` by default) and
fills the fields (:meth:`oars.task_roles.Exporter.prediction_from_export`), so this core file names no task.
"""

from __future__ import annotations

from typing import Any

import torch
from mmengine.config import Config
from mmengine.model import BaseModel

from oars.errors import OarsError
from oars.registry import MODELS


@MODELS.register_module()
class ExportedModel(BaseModel):
    """The runtime predictor of an export folder behind ``test_step`` / ``val_step``.

    Args:
        model_dir: the export folder (deploy.yaml + model.onnx, or model.engine).
        scope: the config's ``default_scope``: the task that fills the data samples' predictions.
        device: ``cpu`` or ``cuda``.
        backend: ``onnxruntime`` or ``tensorrt``.
        model_cfg: the config's own ``model`` section, for a task whose predictor needs it
            (:meth:`oars.task_roles.Exporter.export_predictor`).

    Raises:
        OarsError: the task cannot evaluate exports, the export is not a model the task's predictor runs (the
            runtime's message, naming the folder), or it was exported from another task.
    """

    def __init__(self, model_dir: str, scope: str, device: str = "cpu", backend: str = "onnxruntime",
                 model_cfg: dict | None = None) -> None:
        super().__init__()
        from oars.tasks import get_task
        from oars_deploy.errors import DeployError

        self.model_dir = model_dir
        # the exporter of the config's kind of model (its ``model`` section is what the kinds' predicates read)
        self.exporter = get_task(scope).exporter(Config({"default_scope": scope, "model": dict(model_cfg or {})}))
        if not self.exporter.evaluates_exports:
            raise OarsError(f"tools/eval.py --model-dir: task {scope!r} cannot evaluate exported models yet; "
                            "evaluate its checkpoint with -w instead")
        try:
            self.predictor = self.exporter.export_predictor(model_dir, device, backend, model_cfg)
        except DeployError as err:
            raise OarsError(f"--model-dir {model_dir}: {err}") from None
        exported_task = ((getattr(self.predictor, "deploy", None) or {}).get("model") or {}).get("task")
        if exported_task and exported_task != scope:
            raise OarsError(f"--model-dir {model_dir}: its deploy.yaml is a {exported_task!r} model, but the config "
                            f"is a {scope!r} one (default_scope); evaluate it with the config it was exported from")
        # an empty parameter list would leave the runner without a device to move batches to
        self.register_buffer("_device_anchor", torch.zeros(()), persistent=False)

    def test_step(self, data: dict | tuple | list) -> list:
        """Predict a test batch's original files with the export; returns its data samples with predictions.

        Args:
            data: the test dataloader's batch (``data_samples`` name the files and receive the predictions;
                ``inputs`` go to the task's :meth:`~oars.task_roles.Exporter.export_inputs`, which for image and video
                models ignores them: the runtime reads and pre-processes the files itself, as in deployment).

        Raises:
            OarsError: a file the runtime cannot read or predict (its message, naming the file).
        """
        from oars_deploy.errors import DeployError

        samples = list(data["data_samples"] if isinstance(data, dict) else data[1])
        inputs = data.get("inputs") if isinstance(data, dict) else data[0]
        try:
            results = self.predictor.predict(self.exporter.export_inputs(samples, inputs))
        except DeployError as err:
            raise OarsError(f"--model-dir {self.model_dir}: {err}") from None
        for result, sample in zip(results, samples):
            self.exporter.prediction_from_export(result, sample)
        return samples

    def val_step(self, data: dict | tuple | list) -> list:
        """:meth:`test_step` (validation of an export is the same run)."""
        return self.test_step(data)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Not used: the export runs through :meth:`test_step` only (it cannot be trained)."""
        raise OarsError("an exported model (--model-dir) can be evaluated, not trained or run in tensor mode")
