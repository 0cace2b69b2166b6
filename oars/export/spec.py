"""The contract between the export core and a task's export code.

The core loads the model, calls the task's ``build_export_spec(model, cfg, options)`` (:class:`oars.tasks.Task`,
found by the config's ``default_scope``) and does everything else (ONNX, deploy.yaml, self-check); the task only
says which module to trace and what its outputs mean.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from oars.export.guards import DEFAULT_OPSET


@dataclass
class ExportOptions:
    """What the user asked for; ``extra`` is the rest of ``cfg.export`` (output_op, postprocess, ...)."""

    # (B, C, H, W) from cfg.export.input_shape; a task with its own ``export_options`` (video: clips) gives its rank
    input_shape: tuple[int, ...]
    dynamic: bool = False  # dynamic batch axis
    opset: int = DEFAULT_OPSET
    extra: dict = field(default_factory=dict)
    # the graph is built to count its operations (tools/get_flops.py), never written: a task may stand in for a step
    # ONNX cannot hold with one of the same shapes (detection counts a soft-NMS config's graph with hard NMS)
    counting: bool = False


@dataclass
class ExportSpec:
    """The module to export and the description of its inputs and outputs (written into deploy.yaml).

    ``compare``, when given, replaces the plain per-output comparison of the self-check. It is called as
    ``compare(expected, actual, image) -> dict[str, float]`` with ``expected`` (PyTorch) and ``actual``
    (ONNX Runtime) dicts of output name -> numpy array and ``image`` the float32 input batch (numpy); it returns
    a difference per output name (e.g. the max abs difference after matching detections as sets) that the core
    compares with ``atol``, and may raise :class:`oars.export.ExportCheckError` itself for a structural
    mismatch (e.g. a different number of detections).

    A graph whose input is not one image (clips, features; several inputs such as a GAN's noise + label) gives
    ``sample_inputs``, called as ``sample_inputs(batch, seed) -> (torch_inputs, deploy_inputs,
    preprocess_max_abs_diff)``: the self-check's inputs as PyTorch sees them (one tensor, or a tuple in the
    module's argument order) and as a predictor feeds the graph (one array, or a dict by graph input name), and
    how far the two pre-processing paths differ (it raises :class:`oars.export.ExportCheckError` when they differ
    too much). ``deploy_input`` is then deploy.yaml's ``input`` section (e.g. shape [-1, T, 3, H, W], layout NTCHW)
    and ``deploy_sections`` its further top-level sections (``sampling``, ``gan``). Left None, the core makes
    synthetic images and the image ``input`` section.
    """

    module: torch.nn.Module  # takes the float32 graph inputs in ``graph_inputs`` order; returns a tuple of tensors
    input_name: str  # the main input (deploy.yaml's ``input``; INT8 calibration feeds it)
    output_names: list[str]
    outputs: list[dict]  # per output: {name, shape (-1 for dynamic axes), dtype, meaning}
    postprocess: dict  # what is inside the graph and what the predictor must still do
    atol: float = 1e-4  # tolerance of the ORT-vs-PyTorch self-check (per output, scaled by max(1, max |expected|))
    output_atol: dict | None = None  # name -> atol for outputs that need another tolerance than ``atol`` (masks)
    compare: Callable | None = None  # see the class docstring
    custom_translation_table: dict | None = None  # torch op -> onnxscript function, for custom ops (e.g. oars::nms)
    # FP16/INT8 vs FP32 graph: agreement(reference, candidate) -> {name: value in [0, 1]}; default: per output
    # (oars.export.precision.output_agreement)
    agreement: Callable | None = None
    sample_inputs: Callable | None = None  # see the class docstring
    deploy_input: dict | None = None
    deploy_sections: dict | None = None
    # every graph input in the module's argument order when there are several (``input_name`` among them)
    input_names: list[str] = field(default_factory=list)
    # deploy.yaml's ``preprocess`` when only the built model knows it (a generator's image size); None: the task's
    # ``preprocess_steps`` (computed before the model is built)
    preprocess: list[dict] | None = None
    # deploy.yaml's ``labels`` when they are not the dataset's classes (a generator's attribute names)
    labels: list[str] | None = None
    # the runtime predictor plug-in that runs the export (deploy.yaml's ``predictor``); None: inferred from the
    # sections (``oars_deploy.plugins.predictor_kind``)
    predictor: str | None = None
    # further files of the export folder, file name -> content (a second graph the predictor runs, e.g. the
    # feature extractor of a temporal localiser; the task exports and checks it itself): written atomically beside
    # model.onnx once the main graph passed its self-check
    extra_files: dict[str, bytes] = field(default_factory=dict)

    @property
    def graph_inputs(self) -> list[str]:
        """The graph's input names in the module's argument order."""
        return list(self.input_names) or [self.input_name]
