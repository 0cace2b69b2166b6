"""The exporter's steps: the spec's graph to ONNX (dynamo), the self-check against PyTorch, the reduced-precision
graphs, deploy.yaml's content and the TensorRT engine. :func:`oars.pipelines.export.export_model` runs them in the
order a user needs (cheap mistakes first, files under their final names only after the self-check passed).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import logging
import os.path as osp
import warnings
from collections.abc import Sequence
from typing import Any

import torch
from mmengine.config import Config

from oars.export.check import (
    compare_outputs,
    graph_feeds,
    ort_outputs,
    ort_run,
    ort_session,
    sample_inputs,
    torch_args,
    torch_outputs,
)
from oars.export.deploy_config import write_deploy_yaml
from oars.export.errors import ExportError
from oars.export.guards import EXPORT_FEATURE, exported_at
from oars.export.labels import dataset_labels
from oars.export.options import export_options as export_options  # re-exported: the image default's old home
from oars.export.precision import check_agreement, convert_fp16, quantize_int8
from oars.export.spec import ExportOptions, ExportSpec
from oars.extras import require_extra
from oars.tasks import ENTRY_POINT_GROUP, TASKS, Task, find_task, known_tasks
from oars_deploy.plugins import PREDICTOR_KEY

DYNAMIC_CHECK_BATCH = 3


def reduce_precision(spec: ExportSpec, fp32_path: str, out_path: str, precision: str, batches: Sequence[Any],
                     calib_method: str, check_inputs: Sequence[Any], min_agreement: float | None = None) -> dict:
    """Write the FP16 or INT8 graph of ``fp32_path`` to ``out_path`` and compare both on ``check_inputs`` (the
    FP32 graph is the reference); returns ``{agreement: {output: value}, min_agreement}`` or raises
    :class:`ExportCheckError` when an output agrees less than the threshold."""
    import numpy as np

    if precision == "fp16":
        convert_fp16(fp32_path, out_path)
    else:
        quantize_int8(fp32_path, out_path, batches, spec.input_name, calib_method)
    ref_session, low_session = ort_session(fp32_path), ort_session(out_path)
    runs = [(ort_outputs(ref_session, spec.input_name, x), ort_outputs(low_session, spec.input_name, x))
            for x in check_inputs]
    reference = {n: np.concatenate([r[n] for r, _ in runs]) for n in spec.output_names}
    candidate = {n: np.concatenate([c[n] for _, c in runs]) for n in spec.output_names}
    return check_agreement(reference, candidate, precision, spec.agreement, min_agreement)


# ----------------------------------------------------------------------------- steps
def export_task(cfg: Config) -> Task:
    """The task of the config's ``default_scope`` (:data:`oars.tasks.TASKS`): it builds the export spec."""
    scope = cfg.get("default_scope")
    task = find_task(scope)
    if task is None:
        why = TASKS.broken().get(scope or "") or f"known tasks: {known_tasks()}"
        raise ExportError(f"{cfg.filename}: default_scope {scope!r} has no export support (expected {scope}/task.py "
                          f"with an oars.tasks.Task registered as an {ENTRY_POINT_GROUP!r} entry point; {why})")
    task.import_registries()  # before the pre-processing steps and the model are built in its scope
    return task


def export_spec_to_onnx(spec: ExportSpec, inputs: torch.Tensor | Sequence[torch.Tensor], path: str,
                        options: ExportOptions) -> None:
    """torch.onnx.export (dynamo) of the spec's graph on ``inputs`` (one tensor, or one per graph input in the
    module's argument order), axis 0 of every input dynamic (one shared batch) when asked."""
    args = torch_args(inputs)
    dynamic = _batch_axes(spec.module, len(args)) if options.dynamic else None
    dynamo_export(spec.module, args, path, spec.graph_inputs, list(spec.output_names), options.opset,
                  dynamic_shapes=dynamic, custom_translation_table=spec.custom_translation_table)


def _batch_axes(module: torch.nn.Module, count: int) -> tuple:
    """``dynamic_shapes`` making axis 0 of each of ``count`` inputs the same dynamic batch: one entry per parameter
    of ``forward``, or one tuple for a ``forward(*tensors)`` (torch.export reads varargs as one argument)."""
    batch = torch.export.Dim("batch", min=1, max=4096)
    axes = tuple({0: batch} for _ in range(count))
    params = inspect.signature(module.forward).parameters.values()
    return (axes,) if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params) else axes


def dynamo_export(module: torch.nn.Module, args: tuple[torch.Tensor, ...], path: str, input_names: Sequence[str],
                  output_names: Sequence[str], opset: int, dynamic_shapes: Any = None,
                  custom_translation_table: Any = None) -> None:
    """``torch.onnx.export(dynamo=True)`` of ``module(*args)`` to ``path`` (one file, no external data), its chatter
    sent to the log instead of the console; any exporter failure becomes one ``ExportError`` naming the module, the
    input shapes, the opset and the reason (the exporter raises many types). Shared by every task's export."""
    kwargs: dict[str, Any] = {}
    if dynamic_shapes is not None:
        kwargs["dynamic_shapes"] = dynamic_shapes
    if custom_translation_table:
        kwargs["custom_translation_table"] = dict(custom_translation_table)
    sink = io.StringIO()
    loggers = [logging.getLogger(n) for n in ("torch.onnx", "onnxscript", "torch._dynamo", "torch.export")]
    levels = [lg.level for lg in loggers]
    try:
        for lg in loggers:
            lg.setLevel(logging.ERROR)
        with warnings.catch_warnings(), contextlib.redirect_stdout(sink):
            warnings.simplefilter("ignore")
            program = torch.onnx.export(module, args, None, input_names=list(input_names),
                                        output_names=list(output_names), opset_version=opset, dynamo=True,
                                        external_data=False, verbose=False, **kwargs)
            program.save(path, external_data=False)
    except Exception as err:  # the exporter raises many types; the user needs the module and the reason
        inner = getattr(module, "model", module)
        shapes = {n: list(a.shape) for n, a in zip(input_names, args)}
        raise ExportError(f"torch.onnx.export failed for {type(inner).__name__} (inputs {shapes}, opset {opset}): "
                          f"{type(err).__name__}: {str(err)[:2000]}") from err
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)
    written = onnx_opset(path)
    if written != opset:  # the exporter writes 18 and converts; a failed conversion silently keeps 18
        name = type(getattr(module, "model", module)).__name__
        raise ExportError(f"--opset {opset}: the exporter could not convert the {name} graph to opset {opset} (it "
                          f"stays at opset {written}); export with --opset {written}")


def self_check_inputs(spec: ExportSpec, cfg: Config, model: torch.nn.Module, steps: list[dict],
                   options: ExportOptions, batch: int, seed: int = 0) -> tuple[torch.Tensor, Any, float]:
    """The self-check's (torch input, deploy input, preprocessing max abs diff): the spec's own ``sample_inputs``
    when the task gives one, else synthetic images through the test pipeline and deploy.yaml's steps."""
    if spec.sample_inputs is not None:
        return spec.sample_inputs(batch, seed)
    return sample_inputs(cfg, model, steps, batch, options.input_shape[2:], seed=seed)


def self_check(spec: ExportSpec, onnx_path: str, image: torch.Tensor, deploy_image: Any, cfg: Config,
               model: torch.nn.Module, steps: list[dict], options: ExportOptions) -> dict:
    """ONNX Runtime on the deploy input vs the PyTorch module on the pipeline input; dynamic: also batch 3."""
    session = ort_session(onnx_path)

    def compare(inputs: Any, deploy_inputs: Any, what: str = "") -> dict:
        feeds = graph_feeds(spec, deploy_inputs)
        return compare_outputs(spec, torch_outputs(spec, inputs), ort_run(session, feeds), feeds[spec.input_name],
                               spec.atol, what=what)

    result = {"outputs": compare(image, deploy_image)}
    if options.dynamic:
        image3, deploy3, _ = self_check_inputs(spec, cfg, model, steps, options, DYNAMIC_CHECK_BATCH, seed=100)
        result["dynamic_batch"] = {"batch": DYNAMIC_CHECK_BATCH,
                                   "outputs": compare(image3, deploy3, what=f"dynamic batch {DYNAMIC_CHECK_BATCH}: ")}
    return result



def deploy_dict(cfg: Config, model: torch.nn.Module, spec: ExportSpec, options: ExportOptions,
                steps: list[dict], checkpoint: str, onnx_path: str) -> dict:
    """The deploy.yaml content (schema: oars.export.deploy_config); ``predictor`` when the spec names it."""
    labels, palette = dataset_labels(cfg, model)
    if spec.labels is not None:  # not the dataset's classes (a generator's attribute names)
        from oars_deploy.draw.palette import get_palette

        labels = [str(v) for v in spec.labels]
        palette = [[int(v) for v in row] for row in get_palette(len(labels))]
    deploy = {
        "version": 1,
        "model": {"name": str(cfg.model.get("type")), "task": str(cfg.get("default_scope")),
                  "config": osp.basename(cfg.filename or ""), "checkpoint": osp.basename(checkpoint),
                  "onnx": "model.onnx", "opset": onnx_opset(onnx_path),
                  "precision": "fp32", "exported_at": exported_at()},
        "labels": labels,
        "palette": palette,
        "input": spec.deploy_input or _image_input(spec, options),
        "preprocess": steps,
        "outputs": spec.outputs,
        "postprocess": spec.postprocess,
    }
    deploy.update(spec.deploy_sections or {})
    if spec.predictor:
        deploy[PREDICTOR_KEY] = spec.predictor
    return deploy


def _image_input(spec: ExportSpec, options: ExportOptions) -> dict:
    """deploy.yaml's ``input`` of an image model: [B, 3, H, W] float32 NCHW of BGR images (B -1 when dynamic)."""
    b, c, h, w = options.input_shape
    return {"name": spec.input_name, "shape": [-1 if options.dynamic else b, c, h, w],
            "dynamic_axes": {0: "batch"} if options.dynamic else {}, "dtype": "float32", "layout": "NCHW",
            "color": "BGR"}


def onnx_opset(path: str) -> int | None:
    """The default-domain opset of the ONNX file ``path`` (what deploy.yaml records), or None when it has none."""
    onnx = require_extra("onnx", EXPORT_FEATURE)
    model = onnx.load(path, load_external_data=False)
    return next((int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def add_tensorrt_engine(out_dir: str, deploy: dict, deploy_path: str, opt_batch: int = 1) -> str:
    """model.engine from the ONNX file deploy.yaml runs (its precision is the graph's); deploy.yaml names it."""
    from oars.export.tensorrt import build_engine  # TensorRT's module: loaded only for --format tensorrt

    engine_path = osp.join(out_dir, "model.engine")
    build_engine(osp.join(out_dir, deploy["model"]["onnx"]), engine_path, deploy, opt_batch=opt_batch)
    deploy["model"]["engine"] = osp.basename(engine_path)
    write_deploy_yaml(deploy_path, deploy)
    return engine_path


def __getattr__(name: str) -> Any:
    """``export_model`` and ``load_export_config`` moved up to :mod:`oars.pipelines.export` (they build the model and
    run these steps); the old names keep working for code outside oars."""
    if name in ("export_model", "load_export_config"):
        warnings.warn(f"oars.export.onnx_export.{name} moved to oars.pipelines.export.{name}", DeprecationWarning,
                      stacklevel=2)
        return getattr(importlib.import_module("oars.pipelines.export"), name)
    raise AttributeError(f"module 'oars.export.onnx_export' has no attribute {name!r}")
