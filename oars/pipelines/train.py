"""``tools/train.py`` in-process: set up a run the one way of :mod:`oars.engine.run_setup` (load, validate once,
resolve the engine's defaults), then build and run the Runner; ``print_config`` stops before building.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from mmengine.config import Config
from mmengine.hooks import Hook

from oars.config.check import load_checked_config
from oars.engine.resolve import RunOptions
from oars.engine.run_errors import TrainingInterrupted, interrupted_message, setup_errors_are_config_errors
from oars.engine.run_setup import resolved_config_text, set_up_run, validated_and_resolved
from oars.engine.runner import OarsRunner, build_runner, config_file_text
from oars.engine.work_dir import latest_checkpoint, prepare_work_dir
from oars.errors import OarsError


def train(config: str, overrides: Sequence[str] = (), *, work_dir: str | None = None,
          resume: bool | str | None = None, amp: bool = False, launcher: str = "none",
          overwrite: bool = False, compile: bool = False, loggers: Sequence[str] = (),
          channels_last: bool = False, hooks: Sequence[Hook] = (), data: str | None = None) -> OarsRunner:
    """Train the model a config describes; returns the finished Runner.

    A work dir that holds another run's checkpoints is refused unless ``resume`` continues that run or
    ``overwrite`` deletes its checkpoints (``epoch_N``/``iter_N``/``best_*``/``last_checkpoint``) first.
    ``compile``: ``--compile`` (``compile: true`` unless the config sets its options; ``oars.engine.compile``).
    ``loggers``: ``--logger`` tracker names (mlflow, wandb, tensorboard, clearml; ``oars.engine.tracking``).
    ``channels_last``: ``--channels-last`` (``channels_last: true``; ``oars.engine.memory_format``).
    ``hooks``: hook objects registered on the built Runner beside the config's (a search trial's report,
    ``oars.pipelines.tune``); objects, not config dicts, since they carry the caller's state.
    ``data``: a dataset description file (``--data``; :mod:`oars.config.data_description`) that sets every loader's
    dataset and the model's ``num_classes``.
    """
    if resume and overwrite:
        raise OarsError("--resume continues the run in the work dir and --overwrite deletes it; give one of them")
    cfg = _set_up(config, overrides, data, RunOptions(work_dir=work_dir, resume=resume, amp=amp, launcher=launcher,
                                                      compile=compile, loggers=tuple(loggers),
                                                      channels_last=channels_last))

    def guard(cfg: Config) -> None:
        prepare_work_dir(cfg.work_dir, resume=bool(resume) or bool(cfg.resume), overwrite=overwrite)

    try:
        runner = build_runner(cfg, before_writing=guard)
        for hook in hooks:
            runner.register_hook(hook)
        with setup_errors_are_config_errors(cfg, runner):
            runner.train()
    except KeyboardInterrupt:
        raise _interrupted(cfg, config, overrides, amp, compile, channels_last) from None
    return runner


def print_config(config: str, overrides: Sequence[str] = (), *, work_dir: str | None = None,
                 resume: bool | str | None = None, amp: bool = False, launcher: str = "none",
                 compile: bool = False, loggers: Sequence[str] = (), channels_last: bool = False,
                 data: str | None = None) -> str:
    """The config ``train`` with the same arguments would run and write as ``<work_dir>/config.yaml``, with the
    source of every value oars set (``_resolved_by_oars``); nothing is trained, built or written."""
    options = RunOptions(work_dir=work_dir, resume=resume, amp=amp, launcher=launcher, compile=compile,
                         loggers=tuple(loggers), channels_last=channels_last)
    if data is None:
        return resolved_config_text(config, overrides, options)
    return config_file_text(_set_up(config, overrides, data, replace(options, dry_run=True)))


def _set_up(config: str, overrides: Sequence[str], data: str | None, options: RunOptions) -> Config:
    """:func:`oars.engine.run_setup.set_up_run`, with the ``--data`` description applied after the overrides."""
    if data is None:
        return set_up_run(config, overrides, options)
    return validated_and_resolved(load_checked_config(config, overrides, check=False, data=data), options)


def _interrupted(cfg: Config, config: str, overrides: Sequence[str], amp: bool, compile: bool = False,
                 channels_last: bool = False):
    """Ctrl-C: name the last good checkpoint (atomic saves never leave a torn one) and the resume command."""
    try:
        last = latest_checkpoint(cfg.work_dir)
    except OarsError:  # only damaged checkpoints: --resume explains which
        last = None
    return TrainingInterrupted(interrupted_message(cfg.work_dir, last, config, overrides, amp=amp,
                                                   compile=compile, channels_last=channels_last))
