"""The engine's part of a run's config, in one place: every default, injection and replacement the engine
makes after the config was loaded and validated, each recorded with its reason.

A run needs more than the config files say: hooks for the guarantees oars makes (exact resume, NaN stop,
the config in every checkpoint, throughput in the log), checkpoints written atomically, seeded data-loader
workers, the ``--amp`` optimizer wrapper, a work dir, the checkpoint to resume. :func:`resolve_engine` makes
all of these changes and notes each one (``oars.config.resolved``), so ``<work_dir>/config.yaml`` and
``tools/train.py --print-config`` show what the run uses and where every value came from. Every change is
idempotent: resolving a run's own ``config.yaml`` again adds nothing twice.
"""

from __future__ import annotations

import copy
import logging
import os.path as osp
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from mmengine.config import Config
from mmengine.logging import print_log

from oars.config import OVERRIDE_SOURCE, cfg_provenance, source_of
from oars.config.resolved import EARLIER_RUN, MISSING, previous_resolution, record, value_at
from oars.errors import OarsError

from .checkpoint import verify_checkpoint
from .compile import resolve_compile
from .dist import init_distributed
from .memory_format import resolve_channels_last
from .tracking import resolve_loggers

# Hooks every run needs for the guarantees oars makes, with the reason each is there. Added here, not in the
# configs, so a config that replaces ``custom_hooks`` cannot silently lose them.
ENGINE_HOOK_REASONS: dict[str, str] = {
    "RNGStateHook": "exact resume needs RNGStateHook (random-generator states travel with checkpoints)",
    "NaNGuardHook": "NaNGuardHook stops a run whose loss is no longer finite",
    "ConfigInCheckpointHook": "ConfigInCheckpointHook stores the config in every checkpoint (rebuild from it alone)",
    "ThroughputHook": "ThroughputHook logs images per second",
}
ENGINE_HOOKS = tuple(ENGINE_HOOK_REASONS)
_AMP_REPLACEABLE = {None, "OptimWrapper", "AmpOptimWrapper", "MixedPrecisionOptimWrapper"}
_PLAIN_CHECKPOINT_HOOKS = ("CheckpointHook", "mmengine.CheckpointHook")
_ATOMIC_REASON = ("AtomicCheckpointHook replaces mmengine's CheckpointHook (same arguments): a checkpoint is "
                  "written atomically and old ones are removed only after the new one is complete")
_WORKER_REASON = ("data-loader workers seeded from the main generator (epoch-dependent, restored on resume: "
                  "exact resume)")
_SPLITS = ("train_dataloader", "val_dataloader", "test_dataloader")


@dataclass(frozen=True)
class RunOptions:
    """What the command line decides about a run, beside the config (``tools/train.py``/``eval.py`` flags).

    ``dry_run``: only show the result (``--print-config``): no process group is started and nothing printed.
    """

    work_dir: str | None = None
    resume: bool | str | None = None
    amp: bool = False
    launcher: str = "none"
    load_from: str | None = None
    dry_run: bool = False
    compile: bool = False  # --compile: torch.compile the training step (oars.engine.compile)
    channels_last: bool = False  # --channels-last: channels-last weights (oars.engine.memory_format)
    loggers: tuple[str, ...] = ()  # --logger: experiment trackers (oars.engine.tracking)


def resolve_engine(cfg: Config, options: RunOptions = RunOptions()) -> Config:
    """A copy of ``cfg`` with the command-line choices and every engine default applied, each recorded.

    The order is fixed: what an earlier run recorded (re-loading its ``config.yaml``), ``-o`` overrides, the
    work dir, resume, ``--amp``, the engine's hooks, ``compile`` (``--compile``), ``channels_last``
    (``--channels-last``), trackers (``--logger``), atomic checkpoints, seeded workers, then processes.
    """
    cfg = copy.deepcopy(cfg)
    _carry_previous(cfg)
    _note_overrides(cfg)
    stem = Path(cfg.filename).stem if cfg.filename else "run"
    _resolve_work_dir(cfg, options.work_dir, stem)
    cfg.experiment_name = f"{stem}_{uuid.uuid4().hex[:8]}"  # unique: mmengine caches singletons by this name
    if options.load_from is not None:
        cfg.load_from = options.load_from
    _apply_resume(cfg, options.resume, evaluating=options.load_from is not None, quiet=options.dry_run)
    if options.amp:
        _enable_amp(cfg)
    _add_engine_hooks(cfg)
    _add_shard_hook(cfg)
    resolve_compile(cfg, options.compile, training=options.load_from is None)
    resolve_channels_last(cfg, options.channels_last)
    if options.load_from is None:  # trackers follow training runs; evaluation keeps the config's backends
        resolve_loggers(cfg, options.loggers, config_name=stem, check_packages=not options.dry_run)
    _make_checkpoints_atomic(cfg)
    _seed_workers(cfg)
    _resolve_processes(cfg, options.launcher, options.dry_run)
    return cfg


def _add_shard_hook(cfg: Config) -> None:
    """A training loader over streamed shards (``ShardDataset``, an iterable dataset: torch gives it no sampler)
    needs ``ShardSamplerHook`` to hear the loop's epoch, the run's seed and a resume's position; added unless the
    config lists it."""
    dataset = (cfg.get("train_dataloader") or {}).get("dataset") or {}
    if not isinstance(dataset, dict) or dataset.get("type") != "ShardDataset":
        return
    if any(isinstance(h, dict) and h.get("type") == "ShardSamplerHook" for h in cfg.get("custom_hooks") or []):
        return
    add_hook(cfg, {"type": "ShardSamplerHook"}, "engine: train_dataloader streams ShardDataset shards (the epoch, the "
             "seed and a resume's position reach the stream through this hook)")


def add_hook(cfg: Config, hook: dict[str, Any], source: str) -> None:
    """Append ``hook`` to ``custom_hooks`` because of ``source`` (e.g. ``--show-dir``), recorded."""
    hooks = list(cfg.get("custom_hooks") or [])
    hooks.append(hook)
    cfg.custom_hooks = hooks
    record(cfg, f"custom_hooks[{len(hooks) - 1}]", hook, source)


def _where(cfg: Config, key: str) -> str:
    """The file (or ``-o``) that set ``key``, for notes on values the config already had."""
    return source_of(cfg_provenance(cfg), key) or cfg.filename or "<config>"


def _kept(cfg: Config, key: str, value: Any, reason: str) -> None:
    """The engine needs ``value`` at ``key`` and the config already has it: say both (an earlier note wins)."""
    record(cfg, key, value, f"config ({_where(cfg, key)}); the engine needs it too: {reason}", replace=False)


def _carry_previous(cfg: Config) -> None:
    """Re-loading a run's ``config.yaml``: its notes stay true for every value that is still the same (they name
    the first run's file; a chain of re-runs does not lengthen them)."""
    data = cfg.to_dict()
    for key, item in previous_resolution(cfg).items():
        if value_at(data, key) == item["value"]:
            source = item["source"] if EARLIER_RUN in item["source"] else f"{item['source']}{EARLIER_RUN}{cfg.filename}"
            record(cfg, key, item["value"], source)


def _note_overrides(cfg: Config) -> None:
    data = cfg.to_dict()
    for key, source in cfg_provenance(cfg).items():
        value = value_at(data, key)
        if source == OVERRIDE_SOURCE and value is not MISSING:
            record(cfg, key, value, "-o (command line)")


def _resolve_work_dir(cfg: Config, work_dir: str | None, stem: str) -> None:
    if work_dir:
        cfg.work_dir = work_dir
        record(cfg, "work_dir", work_dir, "--work-dir flag")
    elif not cfg.get("work_dir"):
        cfg.work_dir = osp.join("work_dirs", stem)
        record(cfg, "work_dir", cfg.work_dir, "engine default: work_dirs/<config file name>")


def _apply_resume(cfg: Config, resume: bool | str | None, *, evaluating: bool = False, quiet: bool = False) -> None:
    """Choose the checkpoint to resume (``--resume``: the work dir's latest by iteration, verified; ``--resume
    PATH``: that file, verified) and refuse one trained with another model (keys listed).

    ``resume: true`` written in the config (or ``-o resume=true``) means ``--resume`` (``--resume LOAD_FROM`` when
    the config also names ``load_from``) and goes through the same checks; evaluation never resumes a training state.
    """
    from .resume_check import check_resume_config
    from .work_dir import resume_checkpoint

    if evaluating:
        cfg.resume = False
        return
    if not resume and cfg.get("resume"):
        named = cfg.get("load_from")
        resume = named if isinstance(named, str) and named else True
    if not resume:
        cfg.resume = False
        return
    if isinstance(resume, str):
        if not osp.isfile(resume):
            raise OarsError(f"--resume {resume}: no such checkpoint file")
        latest = verify_checkpoint(resume)
    else:
        latest = resume_checkpoint(cfg.work_dir)
    if latest is None:
        if not quiet:
            print(f"--resume: no checkpoint in {cfg.work_dir} yet; starting from the beginning")
        cfg.resume = False
        return
    check_resume_config(cfg, latest)
    cfg.resume, cfg.load_from = True, latest


def _enable_amp(cfg: Config) -> None:
    wrapper = cfg.get("optim_wrapper")
    if wrapper is None:
        raise OarsError("--amp: the config has no optim_wrapper to enable mixed precision on")
    if wrapper.get("type") not in _AMP_REPLACEABLE:
        raise OarsError(f"--amp: optim_wrapper.type {wrapper.get('type')!r} is not a single-optimizer wrapper; "
                        "set its dtype in the config instead")
    before = wrapper.get("type")
    wrapper["type"] = "MixedPrecisionOptimWrapper"
    was = f" (the config had {before})" if before and before != wrapper["type"] else ""
    record(cfg, "optim_wrapper.type", wrapper["type"], f"--amp flag{was}")


def _add_engine_hooks(cfg: Config) -> None:
    hooks = list(cfg.get("custom_hooks") or [])
    present = {h.get("type"): i for i, h in reversed(list(enumerate(hooks))) if isinstance(h, dict)}  # first wins
    for name, reason in ENGINE_HOOK_REASONS.items():
        if name in present:
            _kept(cfg, f"custom_hooks[{present[name]}]", hooks[present[name]], reason)
            continue
        hooks.append({"type": name})
        record(cfg, f"custom_hooks[{len(hooks) - 1}]", hooks[-1], f"engine: {reason}")
    cfg.custom_hooks = hooks


def _seed_workers(cfg: Config) -> None:
    """Workers seeded from the main generator (epoch-dependent, restored on resume); with
    ``randomness.deterministic`` the training workers are restarted each epoch so that holds exactly."""
    deterministic = bool(cfg.get("randomness", {}).get("deterministic"))
    for split in _SPLITS:
        loader = cfg.get(split)
        if not loader or not loader.get("num_workers"):
            continue
        key = f"{split}.worker_init_fn"
        if "worker_init_fn" in loader:
            _kept(cfg, key, loader["worker_init_fn"], _WORKER_REASON)
        else:
            loader["worker_init_fn"] = {"type": "oars.seeded_worker_init_fn"}
            record(cfg, key, loader["worker_init_fn"], f"engine: {_WORKER_REASON}")
        if split == "train_dataloader" and deterministic and loader.get("persistent_workers"):
            loader["persistent_workers"] = False
            record(cfg, f"{split}.persistent_workers", False, "engine: randomness.deterministic restarts the "
                   "training workers each epoch, so their seeds follow the restored generator exactly")


def _make_checkpoints_atomic(cfg: Config) -> None:
    """Checkpoints written atomically, and old ones rotated out only after the new one is complete
    (mmengine's CheckpointHook deletes first; AtomicCheckpointHook takes the same arguments)."""
    hooks = cfg.setdefault("default_hooks", {})
    ckpt = hooks.get("checkpoint")
    if not isinstance(ckpt, dict):
        return
    if ckpt.get("type") in _PLAIN_CHECKPOINT_HOOKS:
        ckpt["type"] = "AtomicCheckpointHook"
        record(cfg, "default_hooks.checkpoint.type", ckpt["type"], f"engine: {_ATOMIC_REASON}")
    elif ckpt.get("type") == "AtomicCheckpointHook":
        _kept(cfg, "default_hooks.checkpoint.type", ckpt["type"], _ATOMIC_REASON)
    if "backend_args" in ckpt:
        _kept(cfg, "default_hooks.checkpoint.backend_args", ckpt["backend_args"], "checkpoints written atomically")
    else:
        ckpt["backend_args"] = {"backend": "atomic_local"}
        record(cfg, "default_hooks.checkpoint.backend_args", ckpt["backend_args"],
               "engine: checkpoints written atomically (a temporary file renamed into place)")


def _resolve_processes(cfg: Config, launcher: str, dry_run: bool) -> None:
    """One process or several (``--launcher pytorch``): the process group, DDP without CUDA, ``sync_bn``."""
    cfg.launcher = launcher
    distributed = launcher != "none" if dry_run else init_distributed(launcher)
    sync_bn = cfg.get("sync_bn")
    if not distributed:
        if sync_bn is True:
            cfg.sync_bn = None  # single process: nothing to synchronise
            record(cfg, "sync_bn", None, "engine: one process (no --launcher pytorch): nothing to synchronise")
        return
    if not torch.cuda.is_available():
        cfg.setdefault("model_wrapper_cfg", {"type": "MMDistributedDataParallel", "device_ids": None})
        cfg.setdefault("env_cfg", {}).setdefault("dist_cfg", {})["backend"] = "gloo"
        record(cfg, "env_cfg.dist_cfg.backend", "gloo", "--launcher pytorch on a machine without CUDA: gloo")
    if sync_bn is True:
        cfg.sync_bn = "torch"
        record(cfg, "sync_bn", "torch", "engine: sync_bn true under --launcher pytorch means torch's SyncBatchNorm")
    if cfg.get("sync_bn") and not torch.cuda.is_available():
        # torch's SyncBatchNorm only runs on GPU tensors.
        if not dry_run:
            print_log("sync_bn needs CUDA; running with per-process BatchNorm on the CPU",
                      logger="current", level=logging.WARNING)
        cfg.sync_bn = None
        record(cfg, "sync_bn", None, "engine: sync_bn needs CUDA; per-process BatchNorm on the CPU")
