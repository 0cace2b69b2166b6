"""The settings and the training config of knowledge distillation: the student's config trained as ``type:
DistillModel`` (oars.compress.distill_model) with a frozen teacher. The run (train, save the student alone, export
it) is :mod:`oars.pipelines.compress.distill`."""

from __future__ import annotations

import copy
import os.path as osp

from mmengine.config import Config

from oars.config.check import load_checked_config
from oars.errors import OarsError

from .distill_classes import check_class_map, config_classes
from .qat import capture_shape, merge_settings, short_schedule

DEFAULTS_FILE = osp.join(osp.dirname(__file__), "distill_defaults.yaml")


def distill_options(cfg: Config, options: dict | None) -> dict:
    """The distillation settings: ``distill_defaults.yaml`` < the config's ``compress.distill`` < ``options``
    (read as :func:`oars.compress.qat.qat_options` reads its own); an unknown key, a missing teacher or a loss
    without its layers is an error naming it."""
    merged = merge_settings(cfg, options, DEFAULTS_FILE, "distill", "distillation")
    for key in ("teacher_config", "teacher_weights"):
        if not merged[key]:
            raise OarsError(f"{cfg.filename}: distillation needs {key} (compress.distill.{key} or the command line)")
    if not osp.isfile(str(merged["teacher_config"])):
        raise OarsError(f"teacher_config {merged['teacher_config']}: file not found")
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


__all__ = ["distill_config", "distill_options"]
