"""``tools/compress.py --method prune``: prune a trained model, write it as an ordinary config + checkpoint,
fine-tune it through the normal runner, then measure it and the original into the variant table.

Layout of ``DIR`` (the ``--work-dir``): ``DIR/compression.{md,json}`` (the table, shared by every method) and one
folder per variant, ``DIR/<variant>/``: ``pruned_config.yaml`` (the generated config: any tool takes it),
``pruned_init.pth`` (the pruned weights before fine-tuning), ``prune_report.json``, the fine-tuning run's
checkpoints and ``config.yaml``, ``export/`` (ONNX + deploy.yaml) and ``eval/`` (metrics.json).

Re-running continues: a variant whose pruned config and weights exist is not pruned again, and fine-tuning resumes
from the latest checkpoint in ``DIR/<variant>/`` (``tools/train.py --resume``).
"""

from __future__ import annotations

import copy
import io
import json
import os
import os.path as osp
from collections.abc import Sequence
from typing import Any

import torch
from mmengine.config import Config
from mmengine.registry import MODELS, DefaultScope
from mmengine.runner import Runner
from torch import nn

from oars.compress.options import prune_settings, variant_name
from oars.compress.prune import PruneReport, prune_to_target
from oars.compress.pruned_model import pruned_shapes
from oars.compress.table import read_rows
from oars.config import load_config
from oars.config.yaml_io import config_to_yaml
from oars.engine.checkpoint import check_checkpoint_file, load_checkpoint_file
from oars.engine.work_dir import latest_checkpoint
from oars.errors import OarsError
from oars.pipelines.model import init_model
from oars.pipelines.train import train
from oars.tasks import activate
from oars_deploy.atomic import atomic_write

from .variants import measure_variant

PRUNED_CONFIG, PRUNED_INIT, PRUNE_REPORT = "pruned_config.yaml", "pruned_init.pth", "prune_report.json"
_RUN_KEYS = ("resume", "load_from", "launcher", "experiment_name", "model_wrapper_cfg", "work_dir", "compress",
             "_resolved_by_oars")


def run_prune(cfg: Config, checkpoint: str, work_dir: str, options: dict[str, Any],
              overrides: Sequence[str] = ()) -> dict[str, Any]:
    """Prune, fine-tune, measure; returns ``{'variant', 'config', 'checkpoint', 'report', 'row'}`` (``row``: the
    variant's table row, None when the table holds one of this checkpoint already), which
    :func:`oars.pipelines.compress.record` adds to the table beside the original's.

    Args:
        cfg: the loaded (not yet resolved) config of the trained model, ``-o`` overrides applied.
        checkpoint: its trained weights.
        work_dir: ``DIR``.
        options: the merged ``compress`` options (oars.compress.options.merged_options).
        overrides: the ``-o`` overrides, applied again to the fine-tuning, evaluation and export of the variant.
    """
    settings = prune_settings(options, cfg.filename)
    variant = variant_name(options, settings)
    check_checkpoint_file(checkpoint)
    folder = osp.join(work_dir, variant)
    config_path, init_path = osp.join(folder, PRUNED_CONFIG), osp.join(folder, PRUNED_INIT)
    if osp.isfile(config_path) and osp.isfile(init_path):
        print(f"{config_path} and {init_path} exist: not pruning again (delete them to prune anew)")
    else:
        model, data = model_and_batch(cfg, checkpoint)
        # one input is enough to trace the graph and count FLOPs (a fraction of the original either way)
        pruned, report = prune_to_target(model, data["inputs"][:1], settings, loss_fn=_loss_fn(data))
        write_pruned(cfg, model, pruned, report, checkpoint, folder)
        print(_report_text(report))
    return finish_variant(work_dir, variant, "prune", options, overrides)


def finish_variant(work_dir: str, variant: str, method: str, options: dict[str, Any],
                   overrides: Sequence[str]) -> dict[str, Any]:
    """Fine-tune the pruned model written in ``DIR/<variant>/`` (:func:`finetune`) and measure its row (unless the
    table measured this checkpoint already); shared by ``--method prune`` and ``--method auto-prune``.

    Returns:
        ``{'variant', 'config', 'checkpoint', 'row', 'report'}`` (``report``: ``prune_report.json``).
    """
    folder = osp.join(work_dir, variant)
    config_path, init_path = osp.join(folder, PRUNED_CONFIG), osp.join(folder, PRUNED_INIT)
    final = finetune(config_path, init_path, folder, options, overrides)
    row = None
    if _row_is_current(work_dir, variant, final):
        print(f"{variant}: the table already measured {final}; not measuring again")
    else:
        row = measure_variant(config_path, final, folder, variant, method, _variant_overrides(overrides), options)
        row = {**row, "checkpoint_mtime": osp.getmtime(final)}
    with open(osp.join(folder, PRUNE_REPORT), encoding="utf-8") as f:
        report = json.load(f)
    return {"variant": variant, "config": config_path, "checkpoint": final, "row": row, "report": report}


def _row_is_current(work_dir: str, variant: str, checkpoint: str) -> bool:
    """Whether the table's row of ``variant`` measured this very checkpoint file (a finished run re-run)."""
    return any(r["variant"] == variant and r.get("checkpoint") == checkpoint
               and r.get("checkpoint_mtime") == osp.getmtime(checkpoint) for r in read_rows(work_dir))


def model_and_batch(cfg: Config, checkpoint: str) -> tuple[nn.Module, dict]:
    """The trained model (eval mode) and one preprocessed training batch (``{'inputs', 'data_samples'}``)."""
    model = init_model(cfg, checkpoint)
    loader_cfg = copy.deepcopy(cfg.get("train_dataloader") or cfg.get("val_dataloader"))
    if not loader_cfg:
        raise OarsError(f"{cfg.filename}: pruning needs a train_dataloader (a batch to trace the network and "
                        "estimate importance on)")
    loader_cfg.update(num_workers=0, persistent_workers=False)
    loader_cfg.pop("worker_init_fn", None)
    activate(cfg.get("default_scope"))
    with DefaultScope.overwrite_default_scope(cfg.get("default_scope")):
        loader = Runner.build_dataloader(loader_cfg, seed=0)
        batch = next(iter(loader))
    with torch.no_grad():  # training=True: labels padded like the inputs, as the loss needs them
        data = model.data_preprocessor(batch, True)
    return model, data


def _loss_fn(data: dict):
    """The training loss of a model on ``data`` (for Taylor importance)."""
    def loss(model: nn.Module) -> torch.Tensor:
        losses = model(data["inputs"], data["data_samples"], mode="loss")
        total, _ = model.parse_losses(losses)
        return total
    return loss


def _base_model_cfg(model_cfg: dict) -> tuple[str, dict]:
    """``(type, arguments)`` of the unpruned architecture (a ``PrunedModel`` config names it in ``pruned_from``)."""
    args = {k: v for k, v in model_cfg.items() if k != "type"}
    if model_cfg.get("type") == "PrunedModel":
        args.pop("pruned_shapes", None)
        return args.pop("pruned_from"), args
    return model_cfg["type"], args


def _drop_pretrained(node: Any) -> None:
    """Remove ``init.checkpoint`` (pretrained weights for training from scratch): the pruned weights come from the
    pruned checkpoint, and full-width pretrained weights no longer fit."""
    if isinstance(node, dict):
        init = node.get("init")
        if isinstance(init, dict) and "checkpoint" in init:
            init.pop("checkpoint")
        for value in node.values():
            _drop_pretrained(value)
    elif isinstance(node, list):
        for value in node:
            _drop_pretrained(value)


def pruned_config(cfg: Config, shapes: dict) -> dict:
    """The generated config: ``cfg`` fully resolved (no ``_base_``), the model as a ``PrunedModel`` of its type."""
    data = copy.deepcopy(cfg.to_dict())
    for key in _RUN_KEYS:
        data.pop(key, None)
    base_type, args = _base_model_cfg(data["model"])
    _drop_pretrained(args)
    data["model"] = {"type": "PrunedModel", "pruned_from": base_type, "pruned_shapes": shapes, **args}
    return data


def write_pruned(cfg: Config, model: nn.Module, pruned: nn.Module, report: PruneReport, checkpoint: str,
                  folder: str, method: str = "prune") -> None:
    """Write the pruned config and weights (checked to rebuild and load strictly), and the report; ``method``
    names the ``--method`` in the generated config's first line."""
    base_type, args = _base_model_cfg(cfg.model.to_dict() if hasattr(cfg.model, "to_dict") else dict(cfg.model))
    with DefaultScope.overwrite_default_scope(cfg.get("default_scope")):
        fresh = MODELS.build({"type": base_type, **copy.deepcopy(args)})
        shapes = pruned_shapes(fresh, pruned)
        data = pruned_config(cfg, shapes)
        rebuilt = MODELS.build(copy.deepcopy(data["model"]))
    try:
        rebuilt.load_state_dict(pruned.state_dict(), strict=True)
    except RuntimeError as err:
        raise OarsError(f"the generated config does not rebuild the pruned network ({err}); a layer changed in a "
                        "way pruned_shapes cannot express: leave it out of compress.scope") from None
    meta = (load_checkpoint_file(checkpoint) or {}).get("meta", {})
    os.makedirs(folder, exist_ok=True)
    buf = io.BytesIO()
    torch.save({"state_dict": pruned.state_dict(), "meta": {"dataset_meta": meta.get("dataset_meta") or {},
                                                            "pruned_from_checkpoint": checkpoint}}, buf)
    atomic_write(osp.join(folder, PRUNED_INIT), buf.getvalue())
    atomic_write(osp.join(folder, PRUNE_REPORT), json.dumps(vars(report), indent=2) + "\n")
    atomic_write(osp.join(folder, PRUNED_CONFIG),  # last: its presence (with the weights) means pruning finished
                 f"# Generated by tools/compress.py --method {method} from {cfg.filename} + {checkpoint}\n"
                 + config_to_yaml(data))


def _report_text(report: PruneReport) -> str:
    lines = [f"pruned: {report.measure} {report.before:.4g} -> {report.after:.4g} ({report.achieved:.3f} of the "
             f"original, target {report.target:g}); params {report.params_before:,} -> {report.params_after:,}; "
             f"channel ratio per step {[round(r, 3) for r in report.step_ratios]}"]
    lines += [f"  not pruned: {path}: {why}" for path, why in report.unprunable.items()]
    return "\n".join(lines)


def _variant_overrides(overrides: Sequence[str]) -> list[str]:
    """The ``-o`` overrides that still apply to the generated config (not those of the model's own layers, which
    the generated config already holds)."""
    return [o for o in overrides if not o.split("=", 1)[0].startswith("model.")]


def finetune(config_path: str, init_path: str, folder: str, options: dict[str, Any],
             overrides: Sequence[str]) -> str:
    """Fine-tune the pruned model through the normal runner (resuming when ``folder`` has checkpoints); returns the
    last checkpoint. ``options['epochs']``: the length of the fine-tuning (``train_cfg.max_epochs``, or
    ``max_iters`` for an iteration-based loop; the learning-rate schedule is fitted to it, :func:`rescaled_schedule`);
    0 skips it (the pruned weights are the result)."""
    epochs = options.get("epochs")
    if epochs is not None and int(epochs) == 0:
        return init_path
    extra = [f"load_from={init_path}"]
    if epochs is not None:
        cfg = load_config(config_path, _variant_overrides(overrides))
        loop = cfg.get("train_cfg") or {}
        key = "max_iters" if "max_iters" in loop else "max_epochs"
        extra += [f"train_cfg.{key}={int(epochs)}", f"train_cfg.val_interval={int(epochs)}"]
        extra += rescaled_schedule(cfg.get("param_scheduler"), loop.get(key), int(epochs), key == "max_epochs")
    train(config_path, [*_variant_overrides(overrides), *extra], work_dir=folder, resume=True)
    last = latest_checkpoint(folder)
    if last is None:
        raise OarsError(f"fine-tuning in {folder} wrote no checkpoint (is default_hooks.checkpoint set?)")
    return last


_SCHEDULE_KEYS = ("begin", "end", "T_max", "milestones")


def rescaled_schedule(schedulers: Any, old_len: Any, new_len: int, by_epoch: bool) -> list[str]:
    """``-o`` overrides that fit the config's learning-rate schedule to a fine-tuning of ``new_len`` epochs (or
    iterations) instead of the training's ``old_len``.

    Why: ``--epochs E`` only shortening the loop would cut a cosine schedule (``T_max`` = the training's length)
    in the middle: the fine-tuning would stop at a high learning rate without the low-rate end that recovers the
    accuracy. Schedulers counted in the loop's unit (``by_epoch`` as the loop) have ``begin``, ``end``, ``T_max``
    and ``milestones`` scaled by ``new_len / old_len`` (rounded, at least 1); the others (an iteration warm-up in an
    epoch loop) keep theirs.

    Args:
        schedulers: ``cfg.param_scheduler`` (a mapping, a list of them, or None).
        old_len: the training loop's ``max_epochs`` / ``max_iters``.
        new_len: the fine-tuning's.
        by_epoch: whether the loop counts epochs.

    Returns:
        ``['param_scheduler.1.T_max=16', ...]`` (empty when nothing is to change).
    """
    if not schedulers or not isinstance(old_len, int) or old_len <= 0 or new_len == old_len:
        return []
    items = [("param_scheduler", schedulers)] if isinstance(schedulers, dict) else \
        [(f"param_scheduler.{i}", s) for i, s in enumerate(schedulers) if isinstance(s, dict)]
    scale = new_len / old_len

    def fit(value: float) -> int:
        return max(1, round(value * scale)) if value > 0 else 0

    out = []
    for where, sched in items:
        if bool(sched.get("by_epoch", True)) != by_epoch:
            continue
        for key in _SCHEDULE_KEYS:
            value = sched.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 1e8:
                out.append(f"{where}.{key}={fit(value)}")
            elif isinstance(value, (list, tuple)) and all(isinstance(v, (int, float)) for v in value):
                out.append(f"{where}.{key}=[{', '.join(str(fit(v)) for v in value)}]")
    return out
