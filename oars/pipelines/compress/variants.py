"""One row of the variant table from a config + checkpoint: parameters, FLOPs per input, the ONNX export's ONNX
Runtime latency (FP32, and INT8 when the export folder has ``model_int8.onnx``), its size on disk, and the
validation metric (``tools/eval.py``'s evaluation). Usable by every compression method; :func:`table_row` makes
the row of a QAT, PTQ or distillation run from its record (the exports it wrote).
"""

from __future__ import annotations

import copy
import os.path as osp
from collections.abc import Sequence
from typing import Any

import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope
from mmengine.runner import Runner

from oars.compress.measure import count_flops, count_params, file_size, ort_latency_ms
from oars.config import load_config
from oars.errors import OarsError
from oars.pipelines.evaluate import evaluate
from oars.pipelines.export import export_model
from oars.pipelines.model import init_model
from oars.tasks import activate


def main_metric(cfg: Any, metrics: dict[str, Any]) -> tuple[str | None, float | None]:
    """The metric the config's checkpoint hook keeps the best of (``save_best``), else the first one."""
    best = ((cfg.get("default_hooks") or {}).get("checkpoint") or {}).get("save_best")
    if isinstance(best, str) and best in metrics:
        return best, metrics[best]
    for key, value in metrics.items():
        if isinstance(value, (int, float)):
            return key, float(value)
    return None, None


def _one_input(cfg: Any, model: Any) -> Any:
    """One preprocessed validation input (batch of 1), what FLOPs are counted on."""
    loader_cfg = copy.deepcopy(cfg.get("val_dataloader") or cfg.get("test_dataloader") or cfg.get("train_dataloader"))
    loader_cfg.update(num_workers=0, persistent_workers=False, batch_size=1)
    loader_cfg.pop("worker_init_fn", None)
    with DefaultScope.overwrite_default_scope(cfg.get("default_scope")):
        batch = next(iter(Runner.build_dataloader(loader_cfg, seed=0)))
    with torch.no_grad():
        return model.data_preprocessor(batch, False)["inputs"]


def measure_variant(config: str, checkpoint: str, folder: str, variant: str, method: str,
                    overrides: Sequence[str] = (), options: dict[str, Any] | None = None) -> dict[str, Any]:
    """The table row of ``config`` + ``checkpoint``; evaluation and export go under ``folder`` (``eval/``,
    ``export/``). ``options``: ``export`` (default true) and ``latency`` (default true) can switch those off.

    Returns:
        ``{'variant', 'method', 'params', 'flops', 'latency_fp32_ms', 'latency_int8_ms', 'size_mb', 'size_of',
        'metric', 'metric_value', 'config', 'checkpoint', 'export_check'}`` (None where not measured).
    """
    options = options or {}
    cfg = load_config(config, list(overrides))
    activate(cfg.get("default_scope"))
    model = init_model(cfg, checkpoint)
    row: dict[str, Any] = {"variant": variant, "method": method, "params": count_params(model),
                           "flops": count_flops(model, _one_input(cfg, model)), "config": config,
                           "checkpoint": checkpoint}
    result = evaluate(config, checkpoint, list(overrides), work_dir=osp.join(folder, "eval"))
    row["metric"], row["metric_value"] = main_metric(cfg, result["metrics"])
    onnx = None
    if options.get("export", True):
        out = osp.join(folder, "export")
        try:
            check = export_model(config, checkpoint, out, overrides=list(overrides), overwrite=True)
        except OarsError as err:  # a model the task cannot export still gets its row
            print(f"{variant}: not exported ({err}); no latency in the table")
            check = None
        if check is not None:
            onnx = check["onnx"]
            row["export_check"] = {k: v.get("max_abs_diff") for k, v in (check.get("check") or {})
                                   .get("outputs", {}).items()}
    if onnx and options.get("latency", True):
        row["latency_fp32_ms"] = ort_latency_ms(onnx)
        int8 = osp.join(osp.dirname(onnx), "model_int8.onnx")
        row["latency_int8_ms"] = ort_latency_ms(int8) if osp.isfile(int8) else None
    size = file_size(onnx) if onnx else None
    row["size_of"] = "onnx" if size is not None else "checkpoint"
    row["size_mb"] = (size if size is not None else file_size(checkpoint) or 0) / 2**20
    return row


def table_row(cfg: Config, record: dict, opts: dict, params: int | None) -> dict:
    """The variant table's row of a QAT, PTQ or distillation record (oars.compress.table's columns): latency of
    the exported graphs (FP32 reference and INT8), size of the deployed one, the validation metric."""
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


__all__ = ["main_metric", "measure_variant", "table_row"]
