"""``tools/compress.py --method qat``: fine-tune a trained model with fake quantisers through the normal runner
(``type: QATModel``, :mod:`oars.compress.qat_model`), export its INT8 graph (:mod:`.qat_export`) and evaluate that
export as deployed. Why torchao's PT2E and how the export is checked: :mod:`oars.compress.qat`, which holds QAT's
settings and training config."""

from __future__ import annotations

import copy
import os.path as osp
from pathlib import Path
from typing import Any

from mmengine.config import Config

import oars.compress.qat_model  # noqa: F401  (registers QATModel)
from oars.compress.qat import qat_config, qat_options
from oars.engine.checkpoint import check_checkpoint_file
from oars.engine.resolve import RunOptions
from oars.engine.run_setup import validated_and_resolved
from oars.errors import OarsError
from oars.pipelines.evaluate import evaluate

from .qat_export import export_qat
from .shared import reused_export, train_resumable, validation_metrics
from .variants import table_row


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
    evaluated = evaluate(config_path, None, work_dir=osp.join(work_dir, "export_eval"),
                         model_dir=osp.dirname(record["export"]))
    record["metrics_fake_quant"] = record.get("metrics")
    record["metrics"] = {k: float(v) for k, v in evaluated["metrics"].items() if isinstance(v, (int, float))}
    record["metrics_of"] = "int8 export"


def _captured(model: Any) -> list[str]:
    inner = getattr(model, "module", model)
    graphs = getattr(inner, "qat_graphs", None)
    return [n.replace("__", ".") for n, _ in graphs.named_children()] if graphs is not None else []


__all__ = ["run_qat"]
