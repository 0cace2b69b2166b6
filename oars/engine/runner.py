"""Assemble an mmengine Runner from an oars config and run training / testing.

Everything the command-line tools do lives here, so the tools stay thin and tests can
call the same functions in-process.
"""

from __future__ import annotations

import copy
import logging
import os.path as osp
import uuid
from collections.abc import Callable
from pathlib import Path

import torch
from mmengine.config import Config
from mmengine.dist import is_main_process
from mmengine.logging import print_log
from mmengine.registry import DefaultScope
from mmengine.runner import Runner

from oars.errors import OarsError

from .checkpoint import CheckpointError, checkpoint_mismatch, verify_checkpoint
from .dist import init_distributed
from .run_errors import RunPhase, setup_errors_are_config_errors
from .writable import check_writable_dir

# Hooks every run needs for the guarantees oars makes (exact resume, NaN stop, config in
# checkpoints, throughput in the log). Added in code so a config that replaces
# ``custom_hooks`` cannot silently lose them.
ENGINE_HOOKS = ("RNGStateHook", "NaNGuardHook", "ConfigInCheckpointHook", "ThroughputHook")
_AMP_REPLACEABLE = {None, "OptimWrapper", "AmpOptimWrapper", "MixedPrecisionOptimWrapper"}


# Keys that describe one run (how it was started), not the experiment: left out of the saved
# config so that training again from ``config.yaml`` does not silently resume a stale run.
RUN_STATE_KEYS = ("resume", "load_from", "launcher", "experiment_name", "model_wrapper_cfg")


def shareable_config(cfg: Config) -> Config:
    """The resolved config without the run-state keys (what ``config.yaml`` and checkpoints store)."""
    out = copy.deepcopy(cfg)
    for key in RUN_STATE_KEYS:
        out.pop(key, None)
    return out


class OarsRunner(Runner):
    """mmengine's Runner, writing the resolved config as ``<work_dir>/config.yaml`` and loading
    evaluation weights strictly (``strict_load``): a checkpoint that does not fit the model is an
    error, not a warning followed by the metrics of a half-initialised network."""

    strict_load = False

    def __init__(self, *args, **kwargs) -> None:
        self.run_phase = RunPhase()  # which loop and batch is running: errors say where they happened
        super().__init__(*args, **kwargs)

    def call_hook(self, fn_name: str, **kwargs) -> None:
        self.run_phase.on_hook(fn_name, kwargs)
        super().call_hook(fn_name, **kwargs)

    def dump_config(self) -> None:
        if not is_main_process():
            return
        from oars.config import dump_config

        dump_config(shareable_config(self.cfg), osp.join(self.work_dir, "config.yaml"))

    def _init_model_weights(self) -> None:
        """Pretrained weights (``init.checkpoint`` of backbones) are loaded here, when training starts; a resumed
        run skips them (its checkpoint holds every weight). A file that cannot be loaded names its config key."""
        from oars.models.backbones.base import pretrained_weights_skipped

        from .resume_check import flatten

        try:
            if self._resume:
                with pretrained_weights_skipped():
                    super()._init_model_weights()
            else:
                super()._init_model_weights()
        except CheckpointError as err:
            keys = [k for k, v in flatten(self.cfg.get("model", {}), "model").items()
                    if k.endswith("init.checkpoint") and isinstance(v, str) and v in str(err)]
            if not keys:
                raise
            raise CheckpointError(f"{self.cfg.filename}: {keys[0]}: {err}") from None

    def load_checkpoint(self, filename: str, map_location="cpu", strict: bool = False, revise_keys=None):
        strict = strict or self.strict_load
        kwargs = {} if revise_keys is None else {"revise_keys": revise_keys}
        try:
            return super().load_checkpoint(filename, map_location=map_location, strict=strict, **kwargs)
        except RuntimeError as err:
            if not strict or isinstance(err, OarsError):
                raise
            raise checkpoint_mismatch(filename, self.cfg.filename, err) from None


def prepare_config(cfg: Config, *, work_dir: str | None = None, resume: bool | str | None = None,
                   amp: bool = False, launcher: str = "none", load_from: str | None = None) -> Config:
    """Apply the command-line choices and the engine's invariants to a loaded config (a copy)."""
    cfg = copy.deepcopy(cfg)
    stem = Path(cfg.filename).stem if cfg.filename else "run"
    cfg.work_dir = work_dir or cfg.get("work_dir") or osp.join("work_dirs", stem)
    cfg.experiment_name = f"{stem}_{uuid.uuid4().hex[:8]}"  # unique: mmengine caches singletons by this name
    if load_from is not None:
        cfg.load_from = load_from
    _apply_resume(cfg, resume, evaluating=load_from is not None)
    if amp:
        _enable_amp(cfg)
    _add_engine_hooks(cfg)
    _make_checkpoints_atomic(cfg)
    _seed_workers(cfg)
    cfg.launcher = launcher
    if init_distributed(launcher):
        if not torch.cuda.is_available():
            cfg.setdefault("model_wrapper_cfg", {"type": "MMDistributedDataParallel", "device_ids": None})
            cfg.setdefault("env_cfg", {}).setdefault("dist_cfg", {})["backend"] = "gloo"
        if cfg.get("sync_bn") is True:
            cfg.sync_bn = "torch"
        if cfg.get("sync_bn") and not torch.cuda.is_available():
            # torch's SyncBatchNorm only runs on GPU tensors.
            print_log("sync_bn needs CUDA; running with per-process BatchNorm on the CPU",
                      logger="current", level=logging.WARNING)
            cfg.sync_bn = None
    elif cfg.get("sync_bn") is True:
        cfg.sync_bn = None  # single process: nothing to synchronise
    return cfg


def _apply_resume(cfg: Config, resume: bool | str | None, *, evaluating: bool = False) -> None:
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
    wrapper["type"] = "MixedPrecisionOptimWrapper"


def _add_engine_hooks(cfg: Config) -> None:
    hooks = list(cfg.get("custom_hooks") or [])
    present = {h.get("type") for h in hooks if isinstance(h, dict)}
    hooks.extend({"type": name} for name in ENGINE_HOOKS if name not in present)
    cfg.custom_hooks = hooks


def _seed_workers(cfg: Config) -> None:
    """Workers seeded from the main generator (epoch-dependent, restored on resume); with
    ``randomness.deterministic`` the training workers are restarted each epoch so that holds exactly."""
    deterministic = bool(cfg.get("randomness", {}).get("deterministic"))
    for split in ("train_dataloader", "val_dataloader", "test_dataloader"):
        loader = cfg.get(split)
        if not loader or not loader.get("num_workers"):
            continue
        loader.setdefault("worker_init_fn", {"type": "oars.seeded_worker_init_fn"})
        if split == "train_dataloader" and deterministic and loader.get("persistent_workers"):
            loader["persistent_workers"] = False


def _make_checkpoints_atomic(cfg: Config) -> None:
    """Checkpoints written atomically, and old ones rotated out only after the new one is complete
    (mmengine's CheckpointHook deletes first; AtomicCheckpointHook takes the same arguments)."""
    hooks = cfg.setdefault("default_hooks", {})
    ckpt = hooks.get("checkpoint")
    if isinstance(ckpt, dict):
        if ckpt.get("type") in ("CheckpointHook", "mmengine.CheckpointHook"):
            ckpt["type"] = "AtomicCheckpointHook"
        ckpt.setdefault("backend_args", {"backend": "atomic_local"})


def check_dataset_agreement(cfg: Config) -> None:
    """Fail at build time when a dataset disagrees with the model: class count versus
    ``model.num_classes``, then what the config's task checks (``Task.check_dataset``; segmentation: the
    dataset's ``ignore_index`` versus the heads', the label padding value and the evaluators')."""
    num_classes = cfg.get("model", {}).get("num_classes")
    if num_classes is None:
        return
    from mmengine.registry import DATASETS

    from oars.tasks import find_task

    task = find_task(cfg.get("default_scope"))  # a scope without a registered task has no checks of its own

    for split in ("train_dataloader", "val_dataloader", "test_dataloader"):
        loader = cfg.get(split)
        if not loader or not isinstance(loader.get("dataset"), dict):
            continue
        ds_cfg = copy.deepcopy(loader["dataset"])
        inner = ds_cfg  # wrappers (MultiImageMixDataset) take no lazy_init: the dataset they wrap does
        while isinstance(inner.get("dataset"), dict):
            inner = inner["dataset"]
        inner["lazy_init"] = True
        with DefaultScope.overwrite_default_scope(cfg.get("default_scope")):
            dataset = DATASETS.build(ds_cfg)
        classes = dataset.metainfo.get("classes")
        if classes is not None and len(classes) != num_classes:
            raise OarsError(
                f"{cfg.filename}: {split}.dataset ({ds_cfg['type']}) has {len(classes)} classes "
                f"{list(classes)} but model.num_classes is {num_classes}; make them agree "
                f"(e.g. -o model.num_classes={len(classes)})")
        if task is not None:
            task.check_dataset(cfg, split, dataset)


def build_runner(cfg: Config, before_writing: Callable[[Config], None] | None = None) -> OarsRunner:
    """Validate the config, check dataset/model agreement, and build the Runner.

    ``before_writing`` runs once the config is known to be valid and before anything is written to the work dir
    (training uses it to guard the work dir), so a misspelled key is reported before a work-dir complaint.
    """
    from oars.config.check import check_config

    check_config(cfg)
    check_dataset_agreement(cfg)
    if before_writing is not None:
        before_writing(cfg)
    check_writable_dir(cfg.work_dir, "work_dir")  # before mmengine creates it and its log file there
    with setup_errors_are_config_errors(cfg):
        return OarsRunner.from_cfg(cfg)
