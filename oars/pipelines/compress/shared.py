"""What the training methods of :mod:`oars.pipelines.compress` share (QAT and distillation; PTQ reuses exports too):
a fine-tuning that continues the run already in its folder, the export a previous run wrote, the run's metrics."""

from __future__ import annotations

import os.path as osp
from typing import Any

from mmengine.config import Config

from oars.engine.runner import build_runner
from oars.engine.work_dir import latest_checkpoint, prepare_work_dir
from oars_deploy.deploy_config import read_deploy_yaml


def train_resumable(train_cfg: Config, work_dir: str) -> Any:
    """Train ``train_cfg`` in ``work_dir``, continuing the run already there (``tools/compress.py`` re-run after an
    interruption or a failed export: the latest checkpoint is resumed, a finished run is not trained again).
    QAT and distillation share it. Returns the runner (after ``train()``)."""
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


__all__ = ["reused_export", "train_resumable", "validation_metrics"]
