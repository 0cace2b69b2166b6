"""The extra task's contract object, registered as the ``oars.tasks`` entry point ``oddtask`` (by the test's
``*.dist-info`` folder, not by pyproject.toml). Heavy modules are imported inside the methods."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from oars.tasks import Exporter, ModelKind, Predictor, Task

if TYPE_CHECKING:
    import torch
    from mmengine.config import Config

    from oars.export.spec import ExportOptions, ExportSpec
    from oars_deploy.failures import Failures


class OddExporter(Exporter):
    """One image in, the class scores out."""

    def build_export_spec(self, model: torch.nn.Module, cfg: Config, options: ExportOptions) -> ExportSpec:
        """One image in, softmax ``scores`` [B, num_classes] out; deploy.yaml names the runtime plug-in
        ``oddtask_classes``, which this import registers in the exporting process (``write_deploy_yaml`` accepts
        only a ``predictor`` that is registered there)."""
        from extra_task.models import ScoresModule
        from extra_task.predictor import NAME, OUTPUT
        from oars.export.spec import ExportSpec

        num = int(model.num_classes)
        batch = -1 if options.dynamic else int(options.input_shape[0])
        return ExportSpec(
            module=ScoresModule(model), input_name="image", output_names=[OUTPUT],
            outputs=[{"name": OUTPUT, "shape": [batch, num], "dtype": "float32",
                      "meaning": "softmax class probabilities"}],
            postprocess={"type": NAME, "output": OUTPUT, "num_classes": num, "in_graph": ["softmax"]},
            predictor=NAME)


class OddPredictor(Predictor):
    """``tools/infer.py``: the task's own inference."""

    def infer(self, cfg: Config, weights: str, inputs: str | None, output: str, *, device: str,
              failures: Failures, args: argparse.Namespace) -> list[str]:
        """:func:`extra_task.inference.run_inference` (the core's ``init_model`` / ``build_test_pipeline`` activate
        this task's registries: the package is ``extra_task``, not ``oddtask``, so mmengine could not import them
        by the scope's name)."""
        from extra_task.inference import run_inference

        return run_inference(cfg, weights, inputs, output, device=device, failures=failures)


class OddTask(Task):
    """Dominant-shape classification of the demo shapes images (see ``extra_task/__init__.py``)."""

    scope = "oddtask"
    kinds = (ModelKind("shape classifier", OddExporter(), OddPredictor()),)

    def import_registries(self) -> None:
        """Creates the ``oddtask`` child registries."""
        import extra_task.registry  # noqa: F401


TASK = OddTask()
