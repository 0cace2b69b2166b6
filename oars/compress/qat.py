"""Quantisation-aware training: fine-tune a trained model with fake quantisers, then export its INT8 graph.

Which quantisation stack, measured on the U-Net demo (configs/segmentation/unet/unet_demo_shapes.yaml, export
input 1x3x64x64, torch 2.14.1, onnxruntime 1.32, this CPU):

- torchao 0.18 PT2E (``prepare_qat_pt2e`` / ``convert_pt2e``, XNNPACK quantizer, per-channel symmetric int8): the
  converted graph exports through the dynamo exporter (onnxscript translates ``quantized_decomposed``) to a clean
  Q/DQ graph, batch norms folded (24 QuantizeLinear, 40 DequantizeLinear, 16 Conv, 3 ConvTranspose); ONNX Runtime
  runs it with 13 of the 16 Conv fused into ``QLinearConv`` (the ConvTranspose, which the XNNPACK quantizer does
  not annotate, stay float). The X86 inductor quantizer gives uint8 activations (asymmetric), which TensorRT's
  explicit quantization does not take.
- NNCF 3.4 (pip, not a dependency): its torch backend compiles a C++ extension at first use
  (``quantized_functions_cpu``, needs a compiler and ninja at run time), which did not finish within its 60 s
  limit here; it adds ~15 packages (pymoo, openvino-telemetry, ...). Not taken.

So: torchao PT2E (already the ``compress`` extra). The training runs through the normal runner
(``oars.engine``): the model becomes ``type: QATModel`` (oars.compress.qat_model), which builds the float model,
loads the trained weights, folds batch norms and captures the sub-modules of its export-mode forward. The export
reuses the export core: ``export_model`` writes the FP32 reference (the QAT weights in the float model's layout,
``model.onnx``, checked against PyTorch), the converted graph becomes ``model_int8.onnx``, compared with it by the
INT8 agreement check of the PTQ path (``oars.export.precision.check_agreement``), and deploy.yaml names it, as
``tools/export.py --int8`` does.

This module holds QAT's primitives: its settings and its training config. The run (load the checkpoint, train,
export the INT8 graph, evaluate it) is :mod:`oars.pipelines.compress.qat`, the export
:mod:`oars.pipelines.compress.qat_export`.
"""

from __future__ import annotations

import copy
import os.path as osp

import yaml
from mmengine.config import Config

from oars.errors import OarsError
from oars.export.options import task_export_options
from oars.tasks import get_task

DEFAULTS_FILE = osp.join(osp.dirname(__file__), "qat_defaults.yaml")


def qat_options(cfg: Config, options: dict | None) -> dict:
    """The QAT settings: ``qat_defaults.yaml`` < the config's ``compress.qat`` < ``options``.

    ``options`` is what ``tools/compress.py`` passes (the merged ``compress:`` section and its flags): its own
    ``qat`` section and its top-level keys named in the defaults (``export``, ...) apply; the keys of the tool and
    of other methods are left alone. A ``compress.qat`` key the defaults do not name is an error.

    Returns:
        A dict with every key of the defaults file.
    """
    return merge_settings(cfg, options, DEFAULTS_FILE, "qat", "QAT")


def merge_settings(cfg: Config, options: dict | None, defaults_file: str, method: str, what: str) -> dict:
    """Defaults file < ``cfg.compress.<method>`` < ``options[method]`` < the known top-level keys of ``options``
    (see :func:`qat_options`); an unknown key of a ``<method>`` section is an error naming it."""
    with open(defaults_file, encoding="utf-8") as f:
        merged = yaml.safe_load(f)
    options = dict(options or {})
    sections = [(f"compress.{method}", (cfg.get("compress") or {}).get(method) or {}),
                (f"options.{method}", options.pop(method, None) or {})]
    for where, values in sections:
        if not isinstance(values, dict):
            raise OarsError(f"{cfg.filename}: {where}: expected a mapping of settings, got {values!r}")
        unknown = sorted(set(values) - set(merged))
        if unknown:
            raise OarsError(f"{cfg.filename}: {where}: unknown {what} setting(s) {unknown}; known: {sorted(merged)}")
        merged.update({k: v for k, v in values.items() if v is not None})
    merged.update({k: v for k, v in options.items() if k in merged and v is not None})
    merged["variant"] = options.get("variant") or method
    merged["latency"] = options.get("latency", True)
    return merged


def short_schedule(cfg: Config, iters: int, val_interval: int) -> None:
    """Turn ``cfg`` (in place) into a fine-tuning run of ``iters`` iterations at a constant learning rate with one
    checkpoint at the end: what QAT and distillation (``opts['iters']``) both run after the trained model."""
    cfg.train_cfg = {"type": "IterBasedTrainLoop", "max_iters": iters, "val_interval": val_interval}
    cfg.param_scheduler = []
    hooks = cfg.get("default_hooks") or {}
    hooks["checkpoint"] = {"type": "CheckpointHook", "interval": iters, "by_epoch": False, "max_keep_ckpts": 1}
    if "logger" in hooks:
        hooks["logger"]["interval"] = min(int(hooks["logger"].get("interval", 10)), iters)
    cfg.default_hooks = hooks
    cfg.log_processor = {**(cfg.get("log_processor") or {}), "by_epoch": False}


def capture_shape(cfg: Config) -> list[int]:
    """The input shape QAT captures the model on: the export's (the task's ``export_options``: an image model's
    ``export.input_shape``, a video model's clip shape from its test pipeline), with a batch of at least 2 (a
    batch of 1 would capture batch-norm-free shapes). Raises :class:`OarsError` naming the config when the export
    section cannot give one."""
    task = get_task(cfg.get("default_scope"), cfg.filename)
    try:
        shape = [int(v) for v in task_export_options(task, cfg, dynamic=False, opset=17).input_shape]
    except OarsError as err:
        raise OarsError(f"{cfg.filename}: QAT captures the model on the export input shape, which the config does "
                        f"not give: {err}") from None
    return [max(2, shape[0]), *shape[1:]]


def qat_config(cfg: Config, checkpoint: str | None, opts: dict) -> Config:
    """The training config of QAT: ``type: QATModel`` around the float model, ``opts['iters']`` iterations at a
    constant, reduced learning rate, one checkpoint at the end, no EMA (it would average the quantisers'
    ranges).

    Args:
        cfg: the float model's loaded config (its export input shape is the capture input, :func:`capture_shape`).
        checkpoint: the trained float weights (None when a QAT checkpoint is loaded afterwards).
        opts: :func:`qat_options`.
    """
    out = copy.deepcopy(cfg)
    sample_shape = capture_shape(cfg)
    model = dict(out.model)
    if model.get("type") == "QATModel":
        raise OarsError(f"{cfg.filename}: model is already a QATModel; give the float model's config")
    qat = {"model_type": model.pop("type"), "sample_shape": sample_shape,
           "quantizer": opts["quantizer"], "float_checkpoint": checkpoint, "modules": opts["modules"]}
    out.model = {"type": "QATModel", "qat": qat, **model}
    iters = int(opts["iters"])
    short_schedule(out, iters, val_interval=iters)
    if not opts["val"]:  # mmengine validates at the last iteration whatever the interval: no val loop at all
        for key in ("val_dataloader", "val_cfg", "val_evaluator"):
            out.pop(key, None)
    optimizer = out.optim_wrapper.optimizer
    optimizer.lr = float(opts["lr"]) if opts["lr"] is not None else float(optimizer.lr) * float(opts["lr_factor"])
    out.custom_hooks = [h for h in out.get("custom_hooks") or [] if h.get("type") != "EMAHook"]
    out.pop("compress", None)
    out.pop("load_from", None)
    return out


__all__ = ["capture_shape", "merge_settings", "qat_config", "qat_options", "short_schedule"]
