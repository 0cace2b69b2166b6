"""Export a trained config + checkpoint to ONNX (and TensorRT) with deploy.yaml, then prove it matches PyTorch.

Order matters for the user: cheap mistakes (format, checkpoint path, export section) fail before the model is
built; the files appear under their final names only after the self-check passed, so a wrong graph never sits in
``out_dir`` looking like a good one.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import io
import logging
import os
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
from oars.export.deploy_config import EXPORT_EXAMPLE, export_input_hw, write_deploy_yaml
from oars.export.errors import ExportError
from oars.export.guards import (
    DEFAULT_OPSET,
    EXPORT_FEATURE,
    check_export_target,
    exported_at,
    require_export_packages,
)
from oars.export.labels import dataset_labels
from oars.export.precision import (
    CALIB_METHODS,
    CalibrationReader,
    agreement_threshold,
    calibration_batches,
    calibration_files,
    check_agreement,
    convert_fp16,
    precision_file,
    precision_of,
    quantize_int8,
)
from oars.export.spec import ExportOptions, ExportSpec
from oars.extras import require_extra
from oars.tasks import ENTRY_POINT_GROUP, TASKS, Task, find_task, known_tasks
from oars_deploy.deploy_config import validate_deploy
from oars_deploy.plugins import PREDICTOR_KEY

FORMATS = ("onnx", "tensorrt")
DYNAMIC_CHECK_BATCH = 3
PRECISION_CHECK_IMAGES = 8  # calibration files the INT8 model is compared with the FP32 one on


def export_model(config: str | Config, checkpoint: str, out_dir: str, *, fmt: str = "onnx", dynamic: bool = False,
                 opset: int = DEFAULT_OPSET, half: bool = False, int8: bool = False, calib_dir: str | None = None,
                 calib_method: str = "entropy", calib_num: int | None = None, overrides: Sequence[str] = (),
                 check: bool = True, device: str = "cpu", overwrite: bool = False,
                 task_options: dict | None = None) -> dict:
    """Write ``out_dir/model.onnx`` + ``out_dir/deploy.yaml`` (+ ``model.engine`` for tensorrt).

    ``half``/``int8``: also ``model_fp16.onnx``/``model_int8.onnx`` (precision in the graph, see
    oars.export.precision; INT8 calibrated on ``calib_dir``, its first ``calib_num`` files when given, read by the
    task's :meth:`~oars.tasks.Task.calibration_reader`: images, or a clip classifier's videos), checked
    against the FP32 graph, and deploy.yaml's ``model.onnx`` names it, so the predictors and TensorRT use it.
    An ``out_dir`` that already holds an export is refused unless ``overwrite`` (exports never replace exports
    unasked); ``opset`` outside the range the exporter writes is refused (oars.export.guards). ``task_options``:
    the values of the task's own ``tools/export.py`` flags (:meth:`oars.tasks.Task.export_arguments`), given to
    the task in ``ExportOptions.extra`` over ``cfg.export``.
    Returns ``{'onnx', 'deploy', 'engine' (tensorrt), 'precision_onnx' (fp16/int8), 'check': {
    'preprocess_max_abs_diff', 'outputs': {name: {max_abs_diff, tolerance}}, 'dynamic_batch': {...} (dynamic),
    'precision': {precision, agreement: {name: value}, min_agreement} (fp16/int8)}}``.
    """
    from oars.engine.checkpoint import check_checkpoint_file
    from oars.engine.work_dir import clean_stale_temp_files
    from oars_deploy.atomic import atomic_write, temp_path

    if fmt not in FORMATS:
        raise ExportError(f"unsupported export format {fmt!r}; expected one of: {'|'.join(FORMATS)}")
    if calib_dir and not int8:
        raise ExportError("--calib-dir is for --int8 (the calibration data of the INT8 model)")
    if int8 and not calib_dir:
        raise ExportError("--int8 needs --calib-dir DIR (a folder of calibration data like the deployment data: "
                          "images, or videos for a clip classifier)")
    precision = precision_of(half, int8)
    if calib_num is not None and int(calib_num) < 1:
        raise ExportError(f"--calib-num must be at least 1, got {calib_num}")
    if calib_method not in CALIB_METHODS:
        raise ExportError(f"--calib-method must be one of {list(CALIB_METHODS)}, got {calib_method!r}")
    if fmt == "tensorrt" and importlib.util.find_spec("tensorrt") is None:
        raise ExportError("--format tensorrt needs the `tensorrt` Python package (pip install tensorrt, on a machine "
                          "with an NVIDIA GPU); --format onnx works without it")
    require_export_packages(check, precision)
    check_export_target(out_dir, overwrite, opset)
    check_checkpoint_file(checkpoint)
    cfg = load_export_config(config, overrides)
    task = _export_task(cfg)
    task.check_export(cfg, fmt=fmt, precision=precision)  # what the task cannot export, before the model is built
    # a task whose input is not one image (clips, features, noise) reads its export section itself
    options = task.export_options(cfg, dynamic=dynamic, opset=opset)
    options.extra.update({k: v for k, v in (task_options or {}).items() if v is not None})
    if precision != "fp32":
        agreement_threshold(precision, options.extra.get("min_agreement"))  # a bad value fails before the export
    reader = task.calibration_reader(cfg, options) if int8 else None  # the task's files -> the graph's inputs
    if int8 and reader is None:
        raise ExportError(f"--int8: {cfg.filename} exports a graph whose input is {list(options.input_shape)}, and "
                          f"its task ({cfg.get('default_scope')}) has no calibration data for it (not [B, 3, H, W] "
                          "images): INT8 export is not supported for it; export FP32 or --half")
    files = calibration_files(calib_dir, reader)[:None if calib_num is None else int(calib_num)] if int8 else []
    if str(device).startswith("cuda") and not _cuda_available():
        raise ExportError(f"--device {device}: CUDA is not available on this machine")
    # before the model: a pipeline that cannot be exported is a cheap, early error
    steps = task.preprocess_steps(cfg)

    from oars.inference import init_model

    model = init_model(cfg, checkpoint, device)
    dataset_labels(cfg, model)  # a label list shorter than the model's classes fails before the slow part
    spec: ExportSpec = task.build_export_spec(model, cfg, options)
    spec.module.eval()
    if precision != "fp32" and len(spec.graph_inputs) > 1:
        raise ExportError(f"{cfg.filename}: --half / --int8 export graphs with one input; this one has "
                          f"{spec.graph_inputs}: export FP32")
    if spec.preprocess is not None:  # known only from the built model (a generator's image size)
        steps = list(spec.preprocess)
    image, deploy_image, pre_diff = self_check_inputs(spec, cfg, model, steps, options, options.input_shape[0])

    os.makedirs(out_dir, exist_ok=True)
    clean_stale_temp_files(out_dir)  # what a killed export left
    onnx_path, deploy_path = osp.join(out_dir, "model.onnx"), osp.join(out_dir, "deploy.yaml")
    low_path = osp.join(out_dir, precision_file(precision)) if precision != "fp32" else None
    tmp_onnx, tmp_low = temp_path(onnx_path), temp_path(low_path or onnx_path)
    try:
        export_spec_to_onnx(spec, image, tmp_onnx, options)
        result: dict[str, Any] = {"onnx": onnx_path, "deploy": deploy_path}
        if check:
            result["check"] = self_check(spec, tmp_onnx, image, deploy_image, cfg, model, steps, options)
            result["check"]["preprocess_max_abs_diff"] = pre_diff
        deploy = deploy_dict(cfg, model, spec, options, steps, checkpoint, tmp_onnx)
        if low_path:
            batches = calibration_batches(files, deploy, options.input_shape[0], reader)
            agreement = reduce_precision(spec, tmp_onnx, tmp_low, precision, batches, calib_method,
                                         check_inputs=_precision_check_inputs(files, deploy, deploy_image, options,
                                                                              reader),
                                         min_agreement=options.extra.get("min_agreement"))
            deploy["model"].update(onnx=osp.basename(low_path), onnx_fp32="model.onnx", precision=precision,
                                   agreement_with_fp32=agreement["agreement"])
            result.setdefault("check", {})["precision"] = {"precision": precision, **agreement}
            result["precision_onnx"] = low_path
        validate_deploy(deploy, deploy_path)
        os.replace(tmp_onnx, onnx_path)
        if low_path:
            os.replace(tmp_low, low_path)
        for name, content in spec.extra_files.items():  # a second graph of the export (see ExportSpec)
            result.setdefault("extra_files", []).append(atomic_write(osp.join(out_dir, name), content))
    finally:
        for tmp in (tmp_onnx, tmp_low):
            if osp.exists(tmp):
                os.remove(tmp)
    write_deploy_yaml(deploy_path, deploy)
    if fmt == "tensorrt":
        result["engine"] = _build_tensorrt(out_dir, deploy, deploy_path, opt_batch=options.input_shape[0])
    return result


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


def _precision_check_inputs(files: list[str], deploy: dict, deploy_image: Any, options: ExportOptions,
                            reader: CalibrationReader | None = None) -> list:
    """INT8: the first calibration files' inputs (the data the user deploys on); FP16: the self-check's sample."""
    if not files:
        return [deploy_image]
    take = files[:max(PRECISION_CHECK_IMAGES, options.input_shape[0])]
    return list(calibration_batches(take, deploy, options.input_shape[0], reader))


# ----------------------------------------------------------------------------- steps
def load_export_config(config: str | Config, overrides: Sequence[str]) -> Config:
    """The config to export: ``config`` itself (a loaded Config, ``overrides`` applied to it) or the file loaded and
    validated with ``overrides``. Public: a task with its own ``export_model`` loads its config the same way."""
    if isinstance(config, Config):
        if overrides:
            from oars.config import apply_overrides

            apply_overrides(config, list(overrides))
        return config
    from oars.config import load_config

    return load_config(config, list(overrides))


def export_options(cfg: Config, dynamic: bool = False, opset: int = DEFAULT_OPSET) -> ExportOptions:
    """``ExportOptions`` from ``cfg.export`` (clear error naming the config when the section is missing)."""
    export = cfg.get("export")
    if not export:
        raise ExportError(f"{cfg.filename}: no `export` section; add one to the config (or -o export.input_shape="
                          f"[1,3,H,W]), e.g. `{EXPORT_EXAMPLE}` (B, C, H, W: the fixed input of the exported model)")
    h, w = export_input_hw(cfg)
    batch = int(export["input_shape"][0])
    extra = {k: v for k, v in dict(export).items() if k != "input_shape"}
    return ExportOptions(input_shape=(batch, 3, h, w), dynamic=dynamic, opset=int(opset), extra=extra)


def _cuda_available() -> bool:
    return torch.cuda.is_available()


def _export_task(cfg: Config) -> Task:
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


def _build_tensorrt(out_dir: str, deploy: dict, deploy_path: str, opt_batch: int = 1) -> str:
    """model.engine from the ONNX file deploy.yaml runs (its precision is the graph's); deploy.yaml names it."""
    from oars.export.tensorrt import build_engine

    engine_path = osp.join(out_dir, "model.engine")
    build_engine(osp.join(out_dir, deploy["model"]["onnx"]), engine_path, deploy, opt_batch=opt_batch)
    deploy["model"]["engine"] = osp.basename(engine_path)
    write_deploy_yaml(deploy_path, deploy)
    return engine_path
