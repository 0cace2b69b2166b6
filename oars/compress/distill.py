"""Knowledge distillation run: the student's config trained as ``type: DistillModel`` (oars.compress.
distill_model) with a frozen teacher, then the student alone saved and exported like any trained model."""

from __future__ import annotations

import copy
import os.path as osp
from pathlib import Path
from typing import Any

import torch
from mmengine.config import Config

from oars.errors import OarsError

DEFAULTS_FILE = osp.join(osp.dirname(__file__), "distill_defaults.yaml")


def distill_options(cfg: Config, options: dict | None) -> dict:
    """The distillation settings: ``distill_defaults.yaml`` < the config's ``compress.distill`` < ``options``
    (read as :func:`oars.compress.qat.qat_options` reads its own); an unknown key, a missing teacher or a loss
    without its layers is an error naming it."""
    from oars.compress.qat import merge_settings

    merged = merge_settings(cfg, options, DEFAULTS_FILE, "distill", "distillation")
    for key in ("teacher_config", "teacher_weights"):
        if not merged[key]:
            raise OarsError(f"{cfg.filename}: distillation needs {key} (compress.distill.{key} or the command line)")
    if not osp.isfile(str(merged["teacher_config"])):
        raise OarsError(f"teacher_config {merged['teacher_config']}: file not found")
    from oars.compress.distill_classes import check_class_map
    from oars.config.check import load_checked_config

    # the teacher's config is checked as the student's is (a misspelt type named, not a KeyError while loading it)
    load_checked_config(str(merged["teacher_config"]), list(merged.get("teacher_overrides") or ()))
    merged["class_map"] = check_class_map(merged.get("class_map"), f"{cfg.filename}: compress.distill.class_map")
    for i, spec in enumerate(merged["losses"] or []):
        missing = [k for k in ("loss", "student_layer", "teacher_layer") if not (spec or {}).get(k)]
        if missing:
            raise OarsError(f"{cfg.filename}: distillation losses[{i}] needs {missing} (e.g. {{student_layer: "
                            "decode_head.conv_seg, teacher_layer: decode_head.conv_seg, loss: {type: LogitKDLoss}})")
    return merged


def distill_config(cfg: Config, checkpoint: str | None, opts: dict) -> Config:
    """The training config: ``type: DistillModel`` with the student's model section, the teacher and the
    losses; ``opts['iters']`` iterations when given, else the student's own schedule."""
    from oars.compress.distill_classes import config_classes
    from oars.compress.qat import capture_shape, short_schedule

    out = copy.deepcopy(cfg)
    try:  # the dry run that sizes the adapters takes the export's input (a video model's clips too)
        shape = capture_shape(cfg)
    except OarsError:
        shape = [2, 3, 64, 64]
    out.model = {"type": "DistillModel", "student": dict(out.model), "sample_shape": shape,
                 "teacher": {"config": str(opts["teacher_config"]), "checkpoint": str(opts["teacher_weights"]),
                             "overrides": list(opts.get("teacher_overrides") or [])},
                 "losses": [copy.deepcopy(dict(s)) for s in opts["losses"]],
                 # the teacher's classes must be these, in this order, or mapped by class_map (distill_classes)
                 "student_classes": config_classes(cfg), "class_map": copy.deepcopy(opts.get("class_map"))}
    if opts.get("iters"):
        iters = int(opts["iters"])
        short_schedule(out, iters, val_interval=iters + 1)
    elif opts.get("epochs") is not None and out.train_cfg.get("type", "EpochBasedTrainLoop") == \
            "EpochBasedTrainLoop":
        out.train_cfg["max_epochs"] = int(opts["epochs"])
    if opts.get("lr") is not None:
        out.optim_wrapper.optimizer.lr = float(opts["lr"])
    # EMA deep-copies the whole model, teacher included; the distilled student is taken as trained
    out.custom_hooks = [h for h in out.get("custom_hooks") or [] if h.get("type") != "EMAHook"]
    if checkpoint:
        out.load_from = checkpoint  # the student's starting weights (student.* keys: see run_distill)
    out.pop("compress", None)
    return out


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
    import oars.compress.distill_model  # noqa: F401  (registers DistillModel and the losses)
    from oars.compress.qat import reused_export, train_resumable, validation_metrics
    from oars.engine.resolve import RunOptions
    from oars.engine.run_setup import validated_and_resolved
    from oars.engine.runner import config_file_text
    from oars.engine.work_dir import latest_checkpoint
    from oars_deploy.atomic import atomic_write, temp_path

    opts = distill_options(cfg, options)
    work_dir = Path(work_dir) / opts["variant"]
    start = _student_start(checkpoint, work_dir) if checkpoint else None
    train_cfg = validated_and_resolved(distill_config(cfg, start, opts), RunOptions(work_dir=str(work_dir)))
    runner = train_resumable(train_cfg, str(work_dir))
    last = latest_checkpoint(str(work_dir))
    if last is None:
        raise OarsError(f"distillation ended without a checkpoint in {work_dir}")
    from oars.compress.distill_model import student_state_dict
    from oars.engine.checkpoint import load_checkpoint_file, state_dict_from_checkpoint

    ckpt = load_checkpoint_file(last)
    student = {"state_dict": student_state_dict(state_dict_from_checkpoint(ckpt)),
               "meta": {k: v for k, v in (ckpt.get("meta") or {}).items() if k in ("dataset_meta", "iter", "epoch")}}
    student_path = str(work_dir / "student.pth")
    tmp = temp_path(student_path)
    torch.save(student, tmp)
    import os

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
        from oars.pipelines.export import export_model

        cfg_for_export = copy.deepcopy(cfg)
        result = export_model(cfg_for_export, student_path, str(work_dir / "export"),
                              overwrite=bool(opts["overwrite"]))
        record["export"] = result["deploy"]
        record["onnx_fp32"] = result["onnx"]
        record["self_check"] = result.get("check")
    from oars.compress.qat import table_row

    trained = getattr(runner.model, "module", runner.model)
    record["row"] = table_row(cfg, record, opts, params=sum(p.numel() for p in trained.student.parameters()))
    return record


def _student_start(checkpoint: str, work_dir: Path) -> str:
    """The student's starting checkpoint with its keys under ``student.`` (what DistillModel loads)."""
    from oars.engine.checkpoint import load_checkpoint_file, state_dict_from_checkpoint
    from oars_deploy.atomic import temp_path

    state = state_dict_from_checkpoint(load_checkpoint_file(checkpoint))
    work_dir.mkdir(parents=True, exist_ok=True)
    path = str(work_dir / "student_start.pth")
    tmp = temp_path(path)
    torch.save({"state_dict": {f"student.{k}": v for k, v in state.items()}}, tmp)
    import os

    os.replace(tmp, path)
    return path
