"""``tools/export.py`` in-process: a trained config + checkpoint to ONNX (and TensorRT) with deploy.yaml, proved
to match PyTorch.

Order matters for the user: cheap mistakes (format, checkpoint path, export section, the task's refusals) fail
before the model is built; the files appear under their final names only after the self-check passed, so a wrong
graph never sits in ``out_dir`` looking like a good one. The steps themselves are :mod:`oars.export`'s.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import os.path as osp
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from mmengine.config import Config

from oars.config import ConfigError, apply_overrides, load_config
from oars.engine.checkpoint import check_checkpoint_file
from oars.engine.work_dir import clean_stale_temp_files
from oars.export.deploy_config import write_deploy_yaml
from oars.export.errors import ExportError
from oars.export.formats import FORMATS as EDGE_FORMATS
from oars.export.formats import FormatWriter
from oars.export.formats.stage import StagedFormat, stage_format
from oars.export.guards import DEFAULT_OPSET, check_export_target, require_export_packages
from oars.export.labels import dataset_labels
from oars.export.onnx_export import (
    add_tensorrt_engine,
    deploy_dict,
    export_spec_to_onnx,
    export_task,
    reduce_precision,
    self_check,
    self_check_inputs,
)
from oars.export.options import task_export_options, task_preprocess_steps
from oars.export.precision import (
    CALIB_METHODS,
    CalibrationReader,
    agreement_threshold,
    calibration_batches,
    calibration_files,
    precision_file,
    precision_of,
)
from oars.export.spec import ExportOptions, ExportSpec
from oars.models.layers.deform_conv import check_deform_conv_export
from oars.pipelines.model import init_model
from oars_deploy.atomic import atomic_write, temp_path
from oars_deploy.deploy_config import validate_deploy

FORMATS = ("onnx", "tensorrt", *EDGE_FORMATS)  # edge formats: written from model.onnx (oars.export.formats)
PRECISION_CHECK_IMAGES = 8  # calibration files the INT8 model is compared with the FP32 one on


def export_model(config: str | Config, checkpoint: str, out_dir: str, *, fmt: str = "onnx", dynamic: bool = False,
                 opset: int = DEFAULT_OPSET, half: bool = False, int8: bool = False, calib_dir: str | None = None,
                 calib_method: str = "entropy", calib_num: int | None = None, overrides: Sequence[str] = (),
                 check: bool = True, device: str = "cpu", overwrite: bool = False,
                 task_options: dict | None = None, min_agreement: float | None = None) -> dict:
    """Write ``out_dir/model.onnx`` + ``out_dir/deploy.yaml`` (+ ``model.engine`` for tensorrt).

    ``half``/``int8``: also ``model_fp16.onnx``/``model_int8.onnx`` (precision in the graph, see
    oars.export.precision; INT8 calibrated on ``calib_dir``, its first ``calib_num`` files when given, read by the
    task's :meth:`~oars.task_roles.Exporter.calibration_reader`: images, or a clip classifier's videos), checked
    against the FP32 graph, and deploy.yaml's ``model.onnx`` names it, so the predictors and TensorRT use it.
    An ``out_dir`` that already holds an export is refused unless ``overwrite`` (exports never replace exports
    unasked); ``opset`` outside the range the exporter writes is refused (oars.export.guards). ``task_options``:
    the values of the task's own ``tools/export.py`` flags (:meth:`oars.task_roles.Exporter.export_arguments`), given to
    the task in ``ExportOptions.extra`` over ``cfg.export``.
    ``fmt`` an edge format (:data:`oars.export.formats.FORMATS`: openvino, ort, ncnn, mnn, litert): its files too,
    written from the ONNX graph and checked against ONNX Runtime FP32 on the self-check inputs (``min_agreement``:
    the threshold, also that of the --half / --int8 ONNX graphs; default per precision and output kind,
    :mod:`oars.export.formats.parity`); deploy.yaml names the files (``model.format``, ``model.backend``,
    ``model.<format>``) and keeps the result (``parity``); below the threshold nothing is renamed into place.
    Returns ``{'onnx', 'deploy', 'engine' (tensorrt), 'precision_onnx' (fp16/int8), 'check': {
    'preprocess_max_abs_diff', 'outputs': {name: {max_abs_diff, tolerance}}, 'dynamic_batch': {...} (dynamic),
    'precision': {precision, agreement: {name: value}, min_agreement} (fp16/int8)}, 'format': {name, files,
    notes, parity} (edge formats)}``.
    """
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
    writer = EDGE_FORMATS.get(fmt)
    if writer is not None:
        writer.require(precision)  # a missing converter fails before any work
    if fmt == "tensorrt" and importlib.util.find_spec("tensorrt") is None:
        raise ExportError("--format tensorrt needs the `tensorrt` Python package (pip install tensorrt, on a machine "
                          "with an NVIDIA GPU); --format onnx works without it")
    require_export_packages(check, precision)
    check_export_target(out_dir, overwrite, opset)
    check_checkpoint_file(checkpoint)
    cfg = load_export_config(config, overrides)
    check_deform_conv_export(cfg.model, opset, cfg.filename)  # DeformConv exists from opset 19: before any work
    task = export_task(cfg)
    exporter = task.exporter(cfg)  # the exporter of the config's kind of model
    exporter.check_export(cfg, fmt=fmt, precision=precision)  # what cannot be exported, before the model is built
    # a task whose input is not one image (clips, features, noise) reads its export section itself
    options = task_export_options(task, cfg, dynamic=dynamic, opset=opset)
    options.extra.update({k: v for k, v in (task_options or {}).items() if v is not None})
    if min_agreement is not None:  # --min-agreement: over export.min_agreement, for every check with a threshold
        options.extra["min_agreement"] = agreement_threshold("fp32", min_agreement)
    if precision != "fp32":
        agreement_threshold(precision, options.extra.get("min_agreement"))  # a bad value fails before the export
    if writer is not None:
        format_settings(writer, options)  # a misspelled export.<format> key or bad value fails before the model
    reader = exporter.calibration_reader(cfg, options) if int8 else None  # the task's files -> the graph's inputs
    if int8 and reader is None:
        raise ExportError(f"--int8: {cfg.filename} exports a graph whose input is {list(options.input_shape)}, and "
                          f"its task ({cfg.get('default_scope')}) has no calibration data for it (not [B, 3, H, W] "
                          "images): INT8 export is not supported for it; export FP32 or --half")
    files = calibration_files(calib_dir, reader)[:None if calib_num is None else int(calib_num)] if int8 else []
    if str(device).startswith("cuda") and not cuda_available():
        raise ExportError(f"--device {device}: CUDA is not available on this machine")
    # before the model: a pipeline that cannot be exported is a cheap, early error
    steps = task_preprocess_steps(task, cfg)
    model = init_model(cfg, checkpoint, device)
    dataset_labels(cfg, model)  # a label list shorter than the model's classes fails before the slow part
    spec: ExportSpec = exporter.build_export_spec(model, cfg, options)
    spec.module.eval()
    if precision != "fp32" and len(spec.graph_inputs) > 1:
        raise ExportError(f"{cfg.filename}: --half / --int8 export graphs with one input; this one has "
                          f"{spec.graph_inputs}: export FP32")
    if spec.preprocess is not None:  # known only from the built model (a generator's image size)
        steps = list(spec.preprocess)
    image, deploy_image, pre_diff = self_check_inputs(spec, cfg, model, steps, options, options.input_shape[0])

    created = not osp.isdir(out_dir)  # a folder this export made is removed again when it fails
    os.makedirs(out_dir, exist_ok=True)
    clean_stale_temp_files(out_dir)  # what a killed export left
    onnx_path, deploy_path = osp.join(out_dir, "model.onnx"), osp.join(out_dir, "deploy.yaml")
    onnx_precision = writer is None or not writer.reduces_precision  # OpenVINO reduces it itself, from FP32
    low_path = osp.join(out_dir, precision_file(precision)) if precision != "fp32" and onnx_precision else None
    staged: StagedFormat | None = None
    written = False
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
                                         check_inputs=precision_check_inputs(files, deploy, deploy_image, options,
                                                                              reader),
                                         min_agreement=options.extra.get("min_agreement"))
            deploy["model"].update(onnx=osp.basename(low_path), onnx_fp32="model.onnx", precision=precision,
                                   agreement_with_fp32=agreement["agreement"])
            result.setdefault("check", {})["precision"] = {"precision": precision, **agreement}
            result["precision_onnx"] = low_path
        if writer is not None:
            staged = stage_edge_format(writer, out_dir, spec, precision, tmp_onnx, low_path and tmp_low, files,
                                       deploy, deploy_image, options, reader)
            deploy["model"].update(staged.deploy_model())
            deploy["parity"] = staged.parity
        validate_deploy(deploy, deploy_path)
        os.replace(tmp_onnx, onnx_path)
        if low_path:
            os.replace(tmp_low, low_path)
        if staged is not None:
            result["format"] = {"name": fmt, "files": staged.commit(out_dir), "notes": staged.files.notes,
                                "parity": staged.parity}
        for name, content in spec.extra_files.items():  # a second graph of the export (see ExportSpec)
            result.setdefault("extra_files", []).append(atomic_write(osp.join(out_dir, name), content))
        written = True
    finally:
        for tmp in (tmp_onnx, tmp_low):
            if osp.exists(tmp):
                os.remove(tmp)
        if staged is not None:
            staged.discard()
        if not written and created:  # a failed export leaves nothing, not even the empty folder it made
            with contextlib.suppress(OSError):
                os.rmdir(out_dir)
    write_deploy_yaml(deploy_path, deploy)
    if fmt == "tensorrt":
        result["engine"] = add_tensorrt_engine(out_dir, deploy, deploy_path, opt_batch=options.input_shape[0])
    return result




def stage_edge_format(writer: FormatWriter, out_dir: str, spec: ExportSpec, precision: str, fp32_onnx: str,
                      low_onnx: str | None, files: list[str], deploy: dict, deploy_image: Any,
                      options: ExportOptions, reader: CalibrationReader | None) -> StagedFormat:
    """The edge format's files of the export, staged and parity-checked (:func:`oars.export.formats.stage.
    stage_format`): converted from the reduced-precision ONNX graph when the core wrote one (``low_onnx``), else
    from the FP32 graph (a writer that reduces precision itself calibrates on ``files`` for INT8); checked on the
    self-check input, or the first calibration files for INT8 (:func:`precision_check_inputs`)."""
    calibration = (calibration_batches(files, deploy, options.input_shape[0], reader)
                   if precision == "int8" and writer.reduces_precision else [])
    return stage_format(writer, out_dir, fp32_onnx, low_onnx or fp32_onnx, precision_file(precision) if low_onnx
                        else "model.onnx", spec, precision, calibration,
                        precision_check_inputs(files, deploy, deploy_image, options, reader),
                        options.extra.get("min_agreement"), format_settings(writer, options))


def format_settings(writer: FormatWriter, options: ExportOptions) -> dict:
    """``export.<format>`` of the config (a format's own settings, e.g. ``export.ort.target_platform``); {} when
    absent.

    Raises:
        ConfigError: the key is there but is not a mapping, or it holds a key the format does not know (a misspelled
            setting would otherwise be ignored).
        ExportError: a value the format refuses (:meth:`FormatWriter.check_settings`).
    """
    value = options.extra.get(writer.name)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"export.{writer.name} must be a mapping of --format {writer.name} settings, got {value!r}")
    unknown = sorted(set(value) - set(writer.settings_keys))
    if unknown:
        raise ConfigError(f"export.{writer.name} has no setting(s) {unknown}; --format {writer.name} knows "
                          f"{list(writer.settings_keys)}")
    writer.check_settings(value)
    return dict(value)


def precision_check_inputs(files: list[str], deploy: dict, deploy_image: Any, options: ExportOptions,
                            reader: CalibrationReader | None = None) -> list:
    """INT8: the first calibration files' inputs (the data the user deploys on); FP16: the self-check's sample."""
    if not files:
        return [deploy_image]
    take = files[:max(PRECISION_CHECK_IMAGES, options.input_shape[0])]
    return list(calibration_batches(take, deploy, options.input_shape[0], reader))




def load_export_config(config: str | Config, overrides: Sequence[str]) -> Config:
    """The config to export: ``config`` itself (a loaded Config, ``overrides`` applied to it) or the file loaded and
    validated with ``overrides``. Public: a task with its own ``export_model`` loads its config the same way."""
    if isinstance(config, Config):
        if overrides:
            apply_overrides(config, list(overrides))
        return config
    return load_config(config, list(overrides))




def cuda_available() -> bool:
    return torch.cuda.is_available()
