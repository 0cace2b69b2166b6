"""Post-training quantisation as a variant of the compression table (``tools/compress.py --method ptq``).

The INT8 export of ``tools/export.py --int8`` (ONNX Runtime static quantisation calibrated on the task's calibration
files: images, or a clip classifier's videos; checked against the FP32 graph), evaluated as deployed: its
validation metric comes from the export run by the runtime predictor (``tools/eval.py --model-dir``), since the
INT8 graph exists only there. Why a method of its own: the issue's table compares the original, PTQ, QAT, pruned
and distilled variants, and "QAT no worse than PTQ" needs PTQ's metric and latency measured the same way, in the
same work dir. Its settings: :func:`oars.compress.ptq.ptq_options`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mmengine.config import Config

from oars.compress.measure import count_params
from oars.compress.ptq import ptq_options
from oars.engine.checkpoint import check_checkpoint_file
from oars.pipelines.evaluate import evaluate
from oars.pipelines.export import export_model
from oars.pipelines.model import init_model

from .shared import reused_export
from .variants import table_row


def run_ptq(cfg: Config, checkpoint: str, work_dir: Path | str, options: dict,
            overrides: Sequence[str] = ()) -> dict:
    """Export ``checkpoint`` with an INT8 graph to ``work_dir/<variant>/export`` and evaluate that export.

    Args:
        cfg: the float model's loaded config (``-o`` overrides applied).
        checkpoint: its trained weights.
        work_dir: the compression folder; the variant (default ``ptq``) goes to ``work_dir/<variant>``
            (``export/``: model.onnx, model_int8.onnx, deploy.yaml; ``eval/``: the INT8 export's metrics).
        options: PTQ settings over the config's ``compress.ptq`` (``ptq_defaults.yaml`` lists them).
        overrides: the ``-o`` overrides, applied again to the evaluation.

    Returns:
        ``{variant: 'ptq', checkpoint, config, export (deploy.yaml), onnx_fp32, onnx_int8, agreement, metrics,
        row: the variant table's row}``. A re-run reuses an export written after ``checkpoint``.
    """
    opts = ptq_options(cfg, options)
    check_checkpoint_file(checkpoint)
    folder = Path(work_dir) / opts["variant"]
    export_dir = str(folder / "export")
    record: dict[str, Any] = {"variant": "ptq", "checkpoint": checkpoint, "config": cfg.filename,
                              "calib_method": opts["calib_method"], "calib_num": opts["calib_num"]}
    reused = reused_export(export_dir, checkpoint)
    if reused is not None and reused.get("onnx_int8"):
        record.update(reused)
    else:
        extra = {"min_agreement": opts["min_agreement"]} if opts["min_agreement"] is not None else None
        result = export_model(cfg, checkpoint, export_dir, int8=True, calib_dir=str(opts["calib_dir"]),
                              calib_method=opts["calib_method"], calib_num=opts["calib_num"],
                              overrides=list(overrides), overwrite=bool(opts["overwrite"]), task_options=extra)
        precision = (result.get("check") or {}).get("precision") or {}
        record.update(export=result["deploy"], onnx_fp32=result["onnx"], onnx_int8=result["precision_onnx"],
                      agreement=precision.get("agreement"))
    evaluated = evaluate(cfg.filename, None, list(overrides), work_dir=str(folder / "eval"), model_dir=export_dir)
    record["metrics"] = {k: v for k, v in evaluated["metrics"].items() if isinstance(v, (int, float))}
    record["row"] = table_row(cfg, record, opts, params=count_params(init_model(cfg, checkpoint)))
    record["row"]["metric_of"] = "int8 export"
    return record


__all__ = ["run_ptq"]
