"""The INT8 export of a QAT checkpoint, through the export core (see oars.compress.qat for why this way).

1. The QAT weights in the float layout (``qat_float.pth`` next to the checkpoint: batch norms unfolded with
   identity statistics, quantisers dropped) go through ``export_model`` with the float config: ``model.onnx``,
   the FP32 reference, ``deploy.yaml`` and the usual ONNX Runtime vs PyTorch self-check.
2. The same checkpoint with ``convert: true`` (real Q/DQ ops), traced with the task's ExportSpec into
   ``model_int8.onnx``.
3. The INT8 graph vs the FP32 one in ONNX Runtime, with the agreement check of the PTQ path; deploy.yaml then
   names ``model_int8.onnx`` (``precision: int8``, ``onnx_fp32``, ``agreement_with_fp32``), as ``--int8`` does.
"""

from __future__ import annotations

import copy
import os
import os.path as osp
import tempfile
from collections import Counter
from typing import Any

import numpy as np
import torch
from mmengine.config import Config
from mmengine.registry import MODELS, DefaultScope

from oars.compress.qat import capture_shape
from oars.compress.qat_model import unfold_state_dict
from oars.engine.checkpoint import load_checkpoint_file, state_dict_from_checkpoint
from oars.errors import OarsError
from oars.export.check import ort_outputs, ort_session
from oars.export.guards import DEFAULT_OPSET
from oars.export.onnx_export import export_spec_to_onnx, self_check_inputs
from oars.export.options import task_export_options
from oars.export.precision import calibration_batches, calibration_files, check_agreement
from oars.extras import require_extra
from oars.pipelines.export import export_model
from oars.pipelines.model import init_model
from oars.tasks import activate, find_task
from oars_deploy.atomic import temp_path
from oars_deploy.deploy_config import read_deploy_yaml, validate_deploy
from oars_deploy.deploy_writer import write_deploy_yaml

QUANTIZED_KERNELS = ("QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger")


def export_qat(cfg: Config, float_cfg: Config, checkpoint: str, out_dir: str, opts: dict,
               model: Any = None) -> dict:
    """Write ``out_dir/{model.onnx, model_int8.onnx, deploy.yaml}`` for the QAT checkpoint ``checkpoint``.

    Args:
        cfg: the QAT config (``type: QATModel``).
        float_cfg: the float model's config (the FP32 reference is exported with it).
        checkpoint: the QAT checkpoint.
        out_dir: the export folder (refused when it holds an export, unless ``opts['overwrite']``).
        opts: QAT settings (``calib_dir``, ``calib_num``, ``min_agreement``, ``overwrite``).
        model: the trained QAT model still in memory (the run that wrote ``checkpoint``), which spares capturing
            it again; None: built from ``cfg`` and ``checkpoint``.

    Returns:
        ``{export: deploy.yaml path, onnx_fp32, onnx_int8, agreement: {output: value}, min_agreement,
        int8_ops: {op type: count} of the graph ONNX Runtime runs}``.
    """
    float_ckpt = float_checkpoint(float_cfg, checkpoint, osp.join(osp.dirname(checkpoint), "qat_float.pth"))
    result = export_model(float_cfg, float_ckpt, out_dir, overwrite=bool(opts.get("overwrite")),
                          task_options={"min_agreement": opts.get("min_agreement")})
    deploy_path = result["deploy"]
    deploy = read_deploy_yaml(deploy_path)

    int8_cfg = _with_qat(cfg, convert=True)
    task = find_task(cfg.get("default_scope"))
    options = task_export_options(task, int8_cfg, dynamic=False, opset=DEFAULT_OPSET)
    if model is None:
        model = init_model(int8_cfg, checkpoint, "cpu")
    else:
        for holder in model.qat_graphs.children():
            holder.convert = True
        model = model.cpu().eval()
    exporter = task.exporter(int8_cfg)
    spec = exporter.build_export_spec(model, int8_cfg, options)
    spec.module.eval()
    reader = exporter.calibration_reader(int8_cfg, options) if opts.get("calib_dir") else None
    if opts.get("calib_dir") and reader is None:
        raise OarsError(f"compress.qat.calib_dir {opts['calib_dir']}: {cfg.filename}'s graph input is "
                        f"{list(options.input_shape)}, which its task has no calibration files for; leave calib_dir "
                        "unset (the INT8 graph is then compared with the FP32 one on the export's sample input)")
    if reader is not None:  # the task's calibration files (images, a clip classifier's videos) as deployed
        files = calibration_files(str(opts["calib_dir"]), reader)[:int(opts.get("calib_num") or 8)]
        inputs = list(calibration_batches(files, deploy, options.input_shape[0], reader))
    else:  # the float export's self-check inputs (a task's own, e.g. video clips, else synthetic images)
        _, image, _ = self_check_inputs(spec, int8_cfg, model, deploy["preprocess"], options, options.input_shape[0])
        inputs = [image]
    int8_path = osp.join(out_dir, "model_int8.onnx")
    tmp = temp_path(int8_path)
    try:
        try:
            export_spec_to_onnx(spec, torch.from_numpy(inputs[0]), tmp, options)
        except OarsError as err:
            if options.input_shape[0] == 1 and "!= 1" in str(err):  # a shape guard of the batch-2 capture
                raise OarsError(f"{err}\nThe QAT graph was captured with a batch of 2 and keeps batch 1 apart "
                                "(e.g. TSM's shift reshapes N*T frames by the batch): export it with a batch of 2, "
                                "-o export.batch=2 (video) or export.input_shape=[2, ...]") from None
            raise
        ref, low = ort_session(result["onnx"]), ort_session(tmp)
        runs = [(ort_outputs(ref, spec.input_name, x), ort_outputs(low, spec.input_name, x)) for x in inputs]
        reference = {n: np.concatenate([r[n] for r, _ in runs]) for n in spec.output_names}
        candidate = {n: np.concatenate([c[n] for _, c in runs]) for n in spec.output_names}
        agreement = check_agreement(reference, candidate, "int8", spec.agreement, opts.get("min_agreement"))
        ops = runtime_ops(tmp)
        deploy["model"].update(onnx=osp.basename(int8_path), onnx_fp32="model.onnx", precision="int8",
                               agreement_with_fp32=agreement["agreement"],
                               name=str(cfg.model["qat"]["model_type"]))
        validate_deploy(deploy, deploy_path)
        os.replace(tmp, int8_path)
    finally:
        if osp.exists(tmp):
            os.remove(tmp)
    write_deploy_yaml(deploy_path, deploy)
    values = ", ".join(f"{k} {'not measured' if v is None else f'{v:.4f}'}" for k, v in agreement["agreement"].items())
    print(f"INT8 (QAT) vs FP32 graph: agreement {values} (needed {agreement['min_agreement']:g}); "
          f"ONNX Runtime kernels: {dict(ops)}")
    return {"export": deploy_path, "onnx_fp32": result["onnx"], "onnx_int8": int8_path,
            "agreement": agreement["agreement"], "min_agreement": agreement["min_agreement"],
            "int8_ops": dict(ops), "self_check": result.get("check")}


def runtime_ops(path: str) -> Counter:
    """Op types of the graph ONNX Runtime actually runs for ``path`` (after its Q/DQ fusions), counting the
    quantised kernels (:data:`QUANTIZED_KERNELS`) and the float Conv/MatMul/Gemm left; how one proves the INT8
    graph runs in INT8 rather than as dequantise -> float op."""
    onnx = require_extra("onnx", "the INT8 export of quantisation-aware training")
    ort = require_extra("onnxruntime", "the INT8 export of quantisation-aware training")

    with tempfile.TemporaryDirectory(prefix="oars-qat-") as tmp:
        so = ort.SessionOptions()
        so.log_severity_level = 3
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        so.optimized_model_filepath = osp.join(tmp, "optimized.onnx")
        ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        nodes = onnx.load(so.optimized_model_filepath).graph.node
    keep = set(QUANTIZED_KERNELS) | {"Conv", "ConvTranspose", "MatMul", "Gemm"}
    return Counter(n.op_type for n in nodes if n.op_type in keep)


def float_checkpoint(float_cfg: Config, checkpoint: str, path: str) -> str:
    """Write the QAT checkpoint ``checkpoint`` in the float model's layout to ``path``
    (:func:`oars.compress.qat_model.unfold_state_dict`); returns ``path``."""
    scope = float_cfg.get("default_scope")
    activate(scope)
    with DefaultScope.overwrite_default_scope(scope):
        model = MODELS.build(copy.deepcopy(float_cfg.model))
    ckpt = load_checkpoint_file(checkpoint)
    state = unfold_state_dict(model, state_dict_from_checkpoint(ckpt), capture_shape(float_cfg))
    model.load_state_dict(state, strict=True)  # the layout is the float model's, or this names the difference
    tmp = temp_path(path)
    try:
        torch.save({"state_dict": state, "meta": {k: v for k, v in (ckpt.get("meta") or {}).items()
                                                   if k in ("dataset_meta", "iter", "epoch")}}, tmp)
        os.replace(tmp, path)
    finally:
        if osp.exists(tmp):
            os.remove(tmp)
    return path


def _with_qat(cfg: Config, **values: Any) -> Config:
    out = copy.deepcopy(cfg)
    out.model["qat"] = {**dict(out.model["qat"]), "float_checkpoint": None, **values}
    return out


__all__ = ["QUANTIZED_KERNELS", "export_qat", "float_checkpoint", "runtime_ops"]
