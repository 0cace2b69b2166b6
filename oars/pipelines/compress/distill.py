"""``tools/compress.py --method distill``: the student's config trained as ``type: DistillModel``
(:mod:`oars.compress.distill_model`) with a frozen teacher, then the student alone saved and exported like any
trained model. Its settings and training config: :mod:`oars.compress.distill`.

Importing this module sets :func:`load_teacher` as DistillModel's teacher loader
(:func:`oars.compress.distill_model.set_teacher_loader`): a teacher given by its config and checkpoint is a trained
model loaded the way every pipeline loads one (:func:`oars.pipelines.model.init_model`, a hub name included).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from mmengine.config import Config
from torch import nn

from oars.compress.distill import distill_config, distill_options
from oars.compress.distill_model import freeze, set_teacher_loader, student_state_dict
from oars.config import load_config
from oars.engine.checkpoint import load_checkpoint_file, state_dict_from_checkpoint
from oars.engine.resolve import RunOptions
from oars.engine.run_setup import validated_and_resolved
from oars.engine.runner import config_file_text
from oars.engine.work_dir import latest_checkpoint
from oars.errors import OarsError
from oars.pipelines.export import export_model
from oars.pipelines.model import init_model
from oars_deploy.atomic import atomic_write, temp_path

from .shared import reused_export, train_resumable, validation_metrics
from .variants import table_row


def load_teacher(config: str, checkpoint: str, overrides: Sequence[str] = ()) -> nn.Module:
    """The teacher model of ``config`` with ``checkpoint`` loaded strictly, frozen (requires_grad False, eval).

    Args:
        config: the teacher's YAML config (any task scope: it is built in its own ``default_scope``).
        checkpoint: its trained weights.
        overrides: ``-o`` style ``key=value`` overrides of the teacher config.

    Returns:
        The frozen teacher (an mmengine ``BaseModel``).
    """
    cfg = load_config(config, list(overrides))
    return freeze(init_model(cfg, checkpoint, "cpu"))


set_teacher_loader(load_teacher)


def run_distill(cfg: Config, checkpoint: str | None, work_dir: Path, options: dict) -> dict:
    """Train the student of ``cfg`` against the teacher of ``options`` in ``work_dir``, then write the student
    alone (``student.pth``, its config) and export it.

    Args:
        cfg: the student's loaded config.
        checkpoint: the student's starting weights, or None (its config's initialisation).
        work_dir: the compression folder; the run goes to ``work_dir/<variant>`` (default ``distill``).
        options: settings over the config's ``compress.distill`` (``distill_defaults.yaml`` lists them).

    Returns:
        The variant record ``{variant: 'distill', checkpoint: student.pth, config: the student's config.yaml,
        export: deploy.yaml or None, teacher, losses: {name: last value}, metrics, row (the variant table's)}``.
    """
    opts = distill_options(cfg, options)
    work_dir = Path(work_dir) / opts["variant"]
    start = _student_start(checkpoint, work_dir) if checkpoint else None
    train_cfg = validated_and_resolved(distill_config(cfg, start, opts), RunOptions(work_dir=str(work_dir)))
    runner = train_resumable(train_cfg, str(work_dir))
    last = latest_checkpoint(str(work_dir))
    if last is None:
        raise OarsError(f"distillation ended without a checkpoint in {work_dir}")
    ckpt = load_checkpoint_file(last)
    student = {"state_dict": student_state_dict(state_dict_from_checkpoint(ckpt)),
               "meta": {k: v for k, v in (ckpt.get("meta") or {}).items() if k in ("dataset_meta", "iter", "epoch")}}
    student_path = str(work_dir / "student.pth")
    tmp = temp_path(student_path)
    torch.save(student, tmp)
    os.replace(tmp, student_path)
    student_cfg = copy.deepcopy(train_cfg)
    student_cfg.model = copy.deepcopy(train_cfg.model["student"])
    for key in ("load_from", "resume"):
        student_cfg.pop(key, None)
    config_path = str(work_dir / "student_config.yaml")
    atomic_write(config_path, config_file_text(student_cfg))
    scores = runner.message_hub.log_scalars
    record: dict[str, Any] = {
        "variant": "distill", "checkpoint": student_path, "config": config_path, "export": None,
        "teacher": {"config": str(opts["teacher_config"]), "checkpoint": str(opts["teacher_weights"])},
        "losses": {k.split("/", 1)[1]: float(v.current()) for k, v in scores.items()
                   if k.startswith("train/") and "loss" in k},
        "metrics": validation_metrics(runner)}
    reused = reused_export(str(work_dir / "export"), last) if opts["export"] else None
    if reused is not None:
        record.update(reused)
    elif opts["export"]:
        cfg_for_export = copy.deepcopy(cfg)
        result = export_model(cfg_for_export, student_path, str(work_dir / "export"),
                              overwrite=bool(opts["overwrite"]))
        record["export"] = result["deploy"]
        record["onnx_fp32"] = result["onnx"]
        record["self_check"] = result.get("check")
    trained = getattr(runner.model, "module", runner.model)
    record["row"] = table_row(cfg, record, opts, params=sum(p.numel() for p in trained.student.parameters()))
    return record


def _student_start(checkpoint: str, work_dir: Path) -> str:
    """The student's starting checkpoint with its keys under ``student.`` (what DistillModel loads)."""
    state = state_dict_from_checkpoint(load_checkpoint_file(checkpoint))
    work_dir.mkdir(parents=True, exist_ok=True)
    path = str(work_dir / "student_start.pth")
    tmp = temp_path(path)
    torch.save({"state_dict": {f"student.{k}": v for k, v in state.items()}}, tmp)
    os.replace(tmp, path)
    return path


__all__ = ["load_teacher", "run_distill"]
