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
"""

from __future__ import annotations

import copy
import os.path as osp
from pathlib import Path
from typing import Any

from mmengine.config import Config

from oars.compress.qat_export import capture_shape as capture_shape  # re-exported: its old home
from oars.compress.qat_export import export_qat
from oars.errors import OarsError

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
    import yaml

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


def train_resumable(train_cfg: Config, work_dir: str) -> Any:
    """Train ``train_cfg`` in ``work_dir``, continuing the run already there (``tools/compress.py`` re-run after an
    interruption or a failed export: the latest checkpoint is resumed, a finished run is not trained again).
    QAT and distillation share it. Returns the runner (after ``train()``)."""
    from oars.engine.runner import build_runner
    from oars.engine.work_dir import latest_checkpoint, prepare_work_dir

    resume = latest_checkpoint(work_dir) is not None
    if resume:  # mmengine resumes from the work dir's last_checkpoint (load_from would name the start weights)
        train_cfg.resume, train_cfg.load_from = True, None
    runner = build_runner(train_cfg, before_writing=lambda c: prepare_work_dir(c.work_dir, resume=resume,
                                                                            overwrite=False))
    runner.train()
    return runner


def reused_export(export_dir: str, checkpoint: str) -> dict | None:
    """The export a previous run of this variant wrote from ``checkpoint`` (its deploy.yaml newer than the
    checkpoint), reused when ``tools/compress.py`` is run again; None when there is none, or an older one (then
    exporting refuses the taken folder, as exports never replace exports).

    Returns:
        ``{export: deploy.yaml, onnx_fp32, [onnx_int8, agreement]}`` (the fields the variant table reads).
    """
    from oars_deploy.deploy_config import read_deploy_yaml

    deploy = osp.join(export_dir, "deploy.yaml")
    if not (osp.isfile(deploy) and osp.getmtime(deploy) >= osp.getmtime(checkpoint)):
        return None
    model = read_deploy_yaml(deploy)["model"]
    out: dict[str, Any] = {"export": deploy, "onnx_fp32": osp.join(export_dir, model.get("onnx_fp32") or model["onnx"])}
    if model.get("precision") == "int8":
        out.update(onnx_int8=osp.join(export_dir, model["onnx"]), agreement=model.get("agreement_with_fp32"))
    print(f"reusing the export in {export_dir} (written after {osp.basename(checkpoint)})")
    return out


def validation_metrics(runner: Any) -> dict[str, float]:
    """The validation metrics of the run's end (``{'acc/top1': ...}``); measured now when the run was resumed
    already finished (no validation happened in this process) and the config has a validation loop."""
    scores = runner.message_hub.log_scalars
    metrics = {k.split("/", 1)[1]: float(v.current()) for k, v in scores.items() if k.startswith("val/")}
    if not metrics and runner.cfg.get("val_cfg") is not None and runner.cfg.get("val_dataloader") is not None:
        metrics = {k: float(v) for k, v in (runner.val() or {}).items() if isinstance(v, (int, float))}
    return metrics


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


def run_qat(cfg: Config, checkpoint: str, work_dir: Path, options: dict) -> dict:
    """Fine-tune ``checkpoint`` with fake quantisers in ``work_dir``, then export the INT8 graph to
    ``work_dir/export`` (see the module docstring).

    Args:
        cfg: the float model's loaded config.
        checkpoint: its trained weights.
        work_dir: the compression folder; the run goes to ``work_dir/<variant>`` (default ``qat``: checkpoint,
            config.yaml, logs, export/).
        options: QAT settings over the config's ``compress.qat`` (``qat_defaults.yaml`` lists them).

    Returns:
        The variant record ``{variant: 'qat', checkpoint, config, export (deploy.yaml or None), onnx_int8,
        agreement: {output: value}, min_agreement, int8_ops: {op: count}, captured: [module names], metrics,
        row: the variant table's row (oars.compress.table)}``.
    """
    import oars.compress.qat_model  # noqa: F401  (registers QATModel)
    from oars.engine.checkpoint import check_checkpoint_file
    from oars.engine.resolve import RunOptions
    from oars.engine.run_setup import validated_and_resolved

    opts = qat_options(cfg, options)
    if not isinstance(opts["iters"], int) or opts["iters"] < 1:
        raise OarsError(f"{cfg.filename}: QAT iters must be a positive integer, got {opts['iters']!r}")
    check_checkpoint_file(checkpoint)
    work_dir = Path(work_dir) / opts["variant"]
    train_cfg = validated_and_resolved(qat_config(cfg, checkpoint, opts), RunOptions(work_dir=str(work_dir)))
    runner = train_resumable(train_cfg, str(work_dir))
    ckpt = osp.join(str(work_dir), f"iter_{opts['iters']}.pth")
    if not osp.isfile(ckpt):
        raise OarsError(f"QAT training ended without writing {ckpt}")
    config_path = osp.join(str(work_dir), "config.yaml")
    metrics = validation_metrics(runner)
    record: dict[str, Any] = {"variant": "qat", "checkpoint": ckpt, "config": config_path, "export": None,
                              "captured": _captured(runner.model), "metrics": metrics,
                              "quantizer": opts["quantizer"], "iters": opts["iters"]}
    if opts["export"]:
        export_cfg = qat_config(cfg, None, opts)
        export_cfg.pop("work_dir", None)
        float_cfg = copy.deepcopy(cfg)
        float_cfg.pop("compress", None)
        model = getattr(runner.model, "module", runner.model)  # the trained model: no second capture
        record.update(reused_export(str(work_dir / "export"), ckpt)
                      or export_qat(export_cfg, float_cfg, ckpt, str(work_dir / "export"), opts, model=model))
    if record.get("onnx_int8") and opts["val"]:
        _deployed_metrics(record, config_path, str(work_dir))
    record["row"] = table_row(cfg, record, opts, params=sum(p.numel() for p in runner.model.parameters()))
    if record.get("metrics_of"):
        record["row"]["metric_of"] = record["metrics_of"]
    return record


def _deployed_metrics(record: dict, config_path: str, work_dir: str) -> None:
    """Evaluate the INT8 export (``tools/eval.py --model-dir``) on the validation set, with the run's own config
    (its data and overrides); its metrics become the record's (the fake-quantised model's are kept as
    ``metrics_fake_quant``). Why: the table compares QAT with PTQ, whose metric exists only as its INT8 export's;
    the deployed graph is also what the fake quantisers only simulate."""
    from oars.pipelines.evaluate import evaluate

    evaluated = evaluate(config_path, None, work_dir=osp.join(work_dir, "export_eval"),
                         model_dir=osp.dirname(record["export"]))
    record["metrics_fake_quant"] = record.get("metrics")
    record["metrics"] = {k: float(v) for k, v in evaluated["metrics"].items() if isinstance(v, (int, float))}
    record["metrics_of"] = "int8 export"


def table_row(cfg: Config, record: dict, opts: dict, params: int | None) -> dict:
    """The variant table's row of a QAT or distillation record (oars.compress.table's columns): latency of the
    exported graphs (FP32 reference and INT8), size of the deployed one, the validation metric."""
    from oars.compress.measure import file_size, ort_latency_ms
    from oars.compress.variants import main_metric

    onnx_fp32, onnx_int8 = record.get("onnx_fp32"), record.get("onnx_int8")
    deployed = onnx_int8 or onnx_fp32
    row = {"variant": opts["variant"], "method": record["variant"], "params": params, "flops": None,
           "config": record["config"], "checkpoint": record["checkpoint"],
           "latency_fp32_ms": ort_latency_ms(onnx_fp32) if onnx_fp32 and opts["latency"] else None,
           "latency_int8_ms": ort_latency_ms(onnx_int8) if onnx_int8 and opts["latency"] else None}
    size = file_size(deployed)
    row["size_of"] = "onnx" if size is not None else "checkpoint"
    row["size_mb"] = (size if size is not None else file_size(record["checkpoint"]) or 0) / 2**20
    row["metric"], row["metric_value"] = main_metric(cfg, record.get("metrics") or {})
    return row


def _captured(model: Any) -> list[str]:
    inner = getattr(model, "module", model)
    graphs = getattr(inner, "qat_graphs", None)
    return [n.replace("__", ".") for n, _ in graphs.named_children()] if graphs is not None else []


__all__ = ["merge_settings", "qat_config", "qat_options", "reused_export", "run_qat", "table_row",
           "train_resumable", "validation_metrics"]
