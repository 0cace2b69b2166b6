"""The Runner of an oars run: mmengine's, writing ``config.yaml`` with its provenance and loading strictly.

Building it is the last step of setting up a run (``oars.engine.run_setup``: load → validate → resolve →
build); ``prepare_config`` (the engine's defaults, ``oars.engine.resolve``) and ``check_dataset_agreement``
(``oars.engine.validate``) stay importable from here for callers that build a Runner themselves.
"""

from __future__ import annotations

import copy
import os.path as osp
from collections.abc import Callable

import torch
from mmengine.config import Config
from mmengine.dist import is_main_process
from mmengine.runner import Runner

from oars.errors import OarsError
from oars.hub.entries import is_hub_name
from oars.hub.loading import load_into_runner
from oars.hub.verify import HubError

from .checkpoint import CheckpointError, checkpoint_mismatch
from .resolve import ENGINE_HOOKS as ENGINE_HOOKS  # re-exported: public API
from .resolve import RunOptions, resolve_engine
from .run_errors import RunPhase
from .run_errors import setup_errors_are_config_errors as setup_errors_are_config_errors  # re-exported
from .validate import check_dataset_agreement as check_dataset_agreement  # re-exported: public API
from .validate import is_validated, validate_config
from .writable import check_writable_dir

# Keys that describe one run (how it was started), not the experiment: left out of the saved
# config so that training again from ``config.yaml`` does not silently resume a stale run.
RUN_STATE_KEYS = ("resume", "load_from", "launcher", "experiment_name", "model_wrapper_cfg")


def shareable_config(cfg: Config) -> Config:
    """The resolved config without the run-state keys (what ``config.yaml`` and checkpoints store)."""
    out = copy.deepcopy(cfg)
    for key in RUN_STATE_KEYS:
        out.pop(key, None)
    return out


def config_file_text(cfg: Config) -> str:
    """``<work_dir>/config.yaml``: the shareable config and its ``_resolved_by_oars`` section (who set what)."""
    from oars.config.resolved import config_with_provenance

    return config_with_provenance(shareable_config(cfg), leave_out=RUN_STATE_KEYS)


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
        from oars_deploy.atomic import atomic_write

        atomic_write(osp.join(self.work_dir, "config.yaml"), config_file_text(self.cfg))

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
        except (CheckpointError, HubError) as err:  # HubError: a named file missing, or its sha256 not the expected
            keys = [k for k, v in flatten(self.cfg.get("model", {}), "model").items()
                    if k.endswith("init.checkpoint") and isinstance(v, str) and v in str(err)]
            if not keys:
                raise
            raise type(err)(f"{self.cfg.filename}: {keys[0]}: {err}") from None

    def _maybe_compile(self, target: str) -> None:
        """``channels_last`` on: the model's 4-D weights channels-last (``oars.engine.memory_format``); then
        ``compile`` on: the model's forward in loss mode (``oars.engine.compile.compile_for_training``), not
        mmengine's ``torch.compile(model.train_step)``, which recompiles every step on the optimizer wrapper's
        logging. mmengine calls this once when training starts, after the weights are initialised or loaded, so
        both see the weights training will use."""
        if target == "train_step" and not self.distributed:  # distributed: done before DDP wrapped it (wrap_model)
            self._apply_memory_format(self.model)
        from .compile import (
            compile_for_training,
            compile_optimizer_steps,
            compile_options,
            compiles_optimizer,
            with_device_defaults,
        )

        options = compile_options(self.cfg.get("compile"), self.cfg.filename or "<config>")
        if options is None or target != "train_step":
            return
        options = with_device_defaults(options, self.model)
        compile_for_training(self.model, options)
        what = "the model's forward in loss mode"
        if compiles_optimizer(self.cfg.get("compile")):
            names = compile_optimizer_steps(self.optim_wrapper, options)
            if names:
                what += (f" and the optimizer step ({', '.join(names)}; torch.optim breaks its graph once on "
                         "purpose; compile.optimizer: false keeps it eager)")
        self.logger.info(f"torch.compile({options}) of {what}; the first iterations compile (CompileReportHook "
                         "reports the graphs and graph breaks)")

    def wrap_model(self, model_wrapper_cfg, model):
        """``channels_last`` under a distributed launcher: applied here, before DDP lays out its gradient buckets
        after the parameters' strides (changed later, DDP warns that its buckets no longer match and copies between
        layouts). The weights are initialised afterwards, when training starts, drawn in memory order: other values
        of the same distribution than a contiguous run's."""
        if self.distributed:
            from mmengine.device import get_device

            model = model.to(get_device())  # as mmengine's wrap_model does first: the blocker check needs the device
            self._apply_memory_format(model)
        return super().wrap_model(model_wrapper_cfg, model)

    def _apply_memory_format(self, model: torch.nn.Module) -> None:
        from .memory_format import apply_channels_last, blocked_message, channels_last_value

        if not channels_last_value(self.cfg.get("channels_last"), self.cfg.filename or "<config>"):
            return
        count, blockers = apply_channels_last(model)
        if blockers:
            self.logger.warning(blocked_message(blockers))
            return
        self.logger.info(f"channels_last: {count} 4-D weights and buffers stored channels-last (NHWC); the "
                         "convolutions' outputs follow")

    def load_checkpoint(self, filename: str, map_location="cpu", strict: bool = False, revise_keys=None):
        strict = strict or self.strict_load
        kwargs = {} if revise_keys is None else {"revise_keys": revise_keys}
        try:
            if is_hub_name(filename):  # torchvision://, oars://: converted, mis-shaped heads skipped and listed
                return load_into_runner(self, filename, map_location=map_location, strict=strict)
            return super().load_checkpoint(filename, map_location=map_location, strict=strict, **kwargs)
        except RuntimeError as err:
            if not strict or isinstance(err, OarsError):
                raise
            raise checkpoint_mismatch(filename, self.cfg.filename, err) from None


def prepare_config(cfg: Config, *, work_dir: str | None = None, resume: bool | str | None = None,
                   amp: bool = False, launcher: str = "none", load_from: str | None = None) -> Config:
    """Apply the command-line choices and the engine's invariants to a loaded config (a copy).

    Kept for callers that build a Runner themselves (``prepare_config`` then :func:`build_runner`, which then
    validates); the tools take ``oars.engine.run_setup``'s one path, which validates before resolving.
    """
    return resolve_engine(cfg, RunOptions(work_dir=work_dir, resume=resume, amp=amp, launcher=launcher,
                                          load_from=load_from))


def build_runner(cfg: Config, before_writing: Callable[[Config], None] | None = None) -> OarsRunner:
    """Build the Runner of a resolved config, validating it first if nothing has (``prepare_config`` alone).

    ``before_writing`` runs once the config is known to be valid and before anything is written to the work dir
    (training uses it to guard the work dir), so a misspelled key is reported before a work-dir complaint.
    """
    if not is_validated(cfg):
        validate_config(cfg)
    if before_writing is not None:
        before_writing(cfg)
    check_writable_dir(cfg.work_dir, "work_dir")  # before mmengine creates it and its log file there
    with setup_errors_are_config_errors(cfg):
        return OarsRunner.from_cfg(cfg)
