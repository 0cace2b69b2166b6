"""The Runner of an oars run: mmengine's, writing ``config.yaml`` with its provenance and loading strictly.

Building it is the last step of setting up a run (``oars.engine.run_setup``: load → validate → resolve →
build); ``prepare_config`` (the engine's defaults, ``oars.engine.resolve``) and ``check_dataset_agreement``
(``oars.engine.validate``) stay importable from here for callers that build a Runner themselves.
"""

from __future__ import annotations

import copy
import logging
import os
import os.path as osp
from collections.abc import Callable, Iterator
from contextlib import contextmanager

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


VERBOSE_ENV = "OARS_VERBOSE"
_console = {"verbose": False}
# mmengine's set-up dumps, left out of a concise console (they stay in the run's log file; the resolved config is
# <work_dir>/config.yaml): the environment block, the config, the hook table, and notices nobody can act on
_DUMPS = ("\n" + "-" * 60 + "\nSystem environment:", "Config:\n", "Hooks will be executed in the following order",
          "Distributed training is not used, all SyncBatchNorm", '"FileClient" will be deprecated',
          '"HardDiskBackend" is the alias of', "The prefix is not set in metric class")
MAX_NOTES = 20


def console_is_verbose() -> bool:
    """Whether runs print mmengine's full set-up dump (environment, config, hooks): :func:`verbose_console` or
    ``OARS_VERBOSE=1`` (tools' ``-v``)."""
    return _console["verbose"] or os.environ.get(VERBOSE_ENV, "").lower() in {"1", "true", "yes"}


@contextmanager
def verbose_console(verbose: bool = True) -> Iterator[None]:
    """Runners built inside the block print the full set-up dump when ``verbose`` (``tools/train.py -v``, the API's
    ``verbose=True``); the concise console otherwise."""
    before = _console["verbose"]
    _console["verbose"] = bool(verbose)
    try:
        yield
    finally:
        _console["verbose"] = before


class ConsoleFilter(logging.Filter):
    """On the console's handler: drops the set-up dumps unless verbose, and keeps every warning and error so that
    :meth:`notes` can repeat them when the run ends (an offline-weights or skipped-parameters message would
    otherwise scroll away under the progress lines)."""

    def __init__(self, verbose: bool) -> None:
        super().__init__()
        self.verbose = verbose
        self.warnings: dict[str, None] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if not self.verbose and message.startswith(_DUMPS):
            return False
        if record.levelno >= logging.WARNING and not getattr(record, "oars_note", False):
            self.warnings.setdefault(message.strip(), None)
        return True

    def notes(self) -> str | None:
        """The run's warnings, once each, under a "Notes" heading; None when there were none."""
        if not self.warnings:
            return None
        kept = list(self.warnings)[:MAX_NOTES]
        more = len(self.warnings) - len(kept)
        lines = [f"Notes ({len(self.warnings)} repeated from above):", *(f"  - {n}" for n in kept)]
        return "\n".join(lines + ([f"  ... and {more} more in the log file"] if more else []))


class OarsRunner(Runner):
    """mmengine's Runner, writing the resolved config as ``<work_dir>/config.yaml`` and loading
    evaluation weights strictly (``strict_load``): a checkpoint that does not fit the model is an
    error, not a warning followed by the metrics of a half-initialised network.

    Its console is concise (:class:`ConsoleFilter`): what runs and where it writes, the progress lines and the
    metrics; mmengine's environment, config and hook dumps go to the log file only unless verbose
    (:func:`verbose_console`), and the warnings are repeated under "Notes" when the run ends."""

    strict_load = False

    def __init__(self, *args, **kwargs) -> None:
        self.run_phase = RunPhase()  # which loop and batch is running: errors say where they happened
        self.console = ConsoleFilter(console_is_verbose())
        super().__init__(*args, **kwargs)

    def build_logger(self, log_level: int | str = "INFO", log_file: str | None = None, **kwargs):
        """mmengine's logger with :attr:`console` on its console handlers (the log file keeps everything)."""
        logger = super().build_logger(log_level=log_level, log_file=log_file, **kwargs)
        for handler in logger.handlers:
            if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
                handler.addFilter(self.console)
        return logger

    def call_hook(self, fn_name: str, **kwargs) -> None:
        self.run_phase.on_hook(fn_name, kwargs)
        if fn_name in ("before_train", "before_test", "before_val") and not self.run_phase_announced:
            self.run_phase_announced = True
            self.logger.info(self.run_summary(fn_name[len("before_"):]))
        super().call_hook(fn_name, **kwargs)

    run_phase_announced = False

    def run_summary(self, phase: str) -> str:
        """One line: what runs (config, model, parameters, dataset sizes) and where it writes."""
        from oars_deploy.words import plural

        model = getattr(self.model, "module", self.model)
        params = sum(p.numel() for p in model.parameters())
        sizes = []
        for split in ("train", "val") if phase == "train" else (phase,):
            loop = getattr(self, f"_{split}_loop", None)  # built loops only (a dict is a loop not built yet)
            dataset = getattr(getattr(loop, "dataloader", None), "dataset", None)
            if dataset is None:
                continue
            try:
                sizes.append(f"{split} {plural(len(dataset), 'sample')}")
            except TypeError:  # an iterable dataset has no length
                sizes.append(f"{split} (streamed)")
        what = {"train": "training", "test": "evaluating", "val": "validating"}[phase]
        if self.distributed:  # the one fact of the environment dump a distributed run must show
            what += f" on {plural(self.world_size, 'process', 'processes')} ({self.launcher} launcher)"
        written = "config.yaml, checkpoints, " if phase == "train" else ""
        return (f"{what} {self.cfg.filename or '<config>'}: {type(model).__name__} ({params / 1e6:.2f} M parameters)"
                f"{'; ' + ', '.join(sizes) if sizes else ''}; writing to {self.work_dir} ({written}full log "
                f"{self.log_dir}){'' if self.console.verbose else '; -v prints the set-up dump'}")

    def _repeat_notes(self) -> None:
        notes = self.console.notes()
        if notes:
            self.logger.info(notes, extra={"oars_note": True})

    def train(self) -> torch.nn.Module:
        try:
            return super().train()
        finally:
            self._repeat_notes()

    def test(self) -> dict:
        try:
            return super().test()
        finally:
            self._repeat_notes()

    def val(self) -> dict:
        try:
            return super().val()
        finally:
            self._repeat_notes()

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
            raise checkpoint_mismatch(filename, self.cfg, err) from None


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
