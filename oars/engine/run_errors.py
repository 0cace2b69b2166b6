"""Errors of a run, told apart by when they happen.

Setting a run up (building the model, data loaders, loops, optimizer, schedulers, loading weights) fails
on config values, so a ValueError/TypeError/KeyError there becomes a ``ConfigError`` naming the dict being
built. Once the first loop has started, an error is not a config problem (a metric bug, bad data at image
4,000): it keeps its type and traceback and is marked with where it happened (``oars_where``, also a note
on the traceback), which the tools print. Ctrl-C during training becomes ``TrainingInterrupted``, naming
the last good checkpoint and the command that continues from it.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from contextlib import contextmanager
from typing import Any

from mmengine.config import Config
from mmengine.runner import BaseLoop

from oars.errors import OarsError

WHERE_ATTR = "oars_where"  # set on an exception raised while a loop ran: "during training, epoch 2 of 24, ..."
_STARTS = {"before_train": "train", "before_val": "val", "before_test": "test"}
_ENDS = {"after_train": "train", "after_val": "val", "after_test": "test"}


class TrainingInterrupted(OarsError):
    """Training was stopped with Ctrl-C; the message names the last good checkpoint and how to continue."""

    exit_code = 130  # the shell's status for a process ended by SIGINT


class RunPhase:
    """Which loop of a run is executing and which batch, followed from the hooks mmengine calls."""

    def __init__(self) -> None:
        self.stages: list[str] = []  # e.g. ["train", "val"] while validating during training
        self.started = False
        self.batch_idx: int | None = None

    def on_hook(self, fn_name: str, kwargs: dict[str, Any]) -> None:
        if fn_name in _STARTS:
            self.stages.append(_STARTS[fn_name])
            self.started, self.batch_idx = True, None
        elif fn_name in _ENDS and self.stages and self.stages[-1] == _ENDS[fn_name]:
            self.stages.pop()
            self.batch_idx = None
        elif fn_name.startswith("before_") and fn_name.endswith("_iter"):
            self.batch_idx = kwargs.get("batch_idx")

    def where(self, runner: Any) -> str:
        """``during training, epoch 2 of 24, batch 3 (iteration 19)``, ``during validation after epoch 4, batch 1``,
        ``during evaluation, batch 5``; ``after the run`` once every loop has ended."""
        if not self.stages:
            return "after the run (in an after_run hook)"
        batch = f", batch {self.batch_idx + 1}" if isinstance(self.batch_idx, int) else ""
        loop = getattr(runner, "_train_loop", None)
        loop = loop if isinstance(loop, BaseLoop) else None  # never build a loop here: it may be what failed
        stage = self.stages[-1]
        if stage == "test":
            return f"during evaluation{batch}"
        if stage == "val":
            after = f" after epoch {loop.epoch}" if loop is not None and hasattr(loop, "max_epochs") else ""
            return f"during validation{after}{batch}"
        if loop is None:
            return f"during training{batch}"
        if hasattr(loop, "max_epochs"):
            return f"during training, epoch {loop.epoch + 1} of {loop.max_epochs}{batch} (iteration {loop.iter + 1})"
        return f"during training, iteration {loop.iter + 1} of {loop.max_iters}"


@contextmanager
def setup_errors_are_config_errors(cfg: Config, runner: Any = None):
    """Errors while the run is set up become a ``ConfigError``; errors once a loop has started keep their
    type and traceback and get ``oars_where`` (see the module docstring).

    Args:
        cfg: the run's config (for the file name and the key paths of built dicts).
        runner: the runner whose loops run inside the block (its ``run_phase`` says whether one started).
    """
    from oars.config import ConfigError

    try:
        yield
    except (KeyboardInterrupt, OarsError):
        raise
    except Exception as err:
        phase: RunPhase | None = getattr(runner, "run_phase", None)
        if phase is not None and phase.started:
            where = phase.where(runner)
            setattr(err, WHERE_ATTR, where)
            err.add_note(f"oars: this happened {where}")
            raise
        if not isinstance(err, (ValueError, TypeError, KeyError)):
            raise
        raise ConfigError(_setup_message(cfg, err)) from err


def _setup_message(cfg: Config, err: BaseException) -> str:
    from oars.config import cfg_provenance, source_of
    from oars.config.build_errors import describe_build_error
    from oars.config.registry_map import _key_text

    provenance = cfg_provenance(cfg)
    filename = cfg.filename or "<config>"

    def describe(path: tuple) -> tuple[str, str]:
        key = _key_text(path)
        return source_of(provenance, key) or filename, key

    found = describe_build_error(cfg.to_dict(), err, describe)
    if found:
        return f"{found} (OARS_DEBUG=1 shows the traceback)"
    return f"{filename}: the run could not be set up: {type(err).__name__}: {err} (OARS_DEBUG=1 shows where)"


def interrupted_message(work_dir: str, checkpoint: str | None, config: str, overrides: Sequence[str], *,
                        amp: bool = False, compile: bool = False, channels_last: bool = False) -> str:
    """What to tell the user after Ctrl-C: the last good checkpoint and the exact command that continues."""
    if checkpoint is None:
        return (f"interrupted before the first checkpoint was saved in {work_dir}; nothing to resume "
                "(run the same command again to start over)")
    args = ["python", "tools/train.py", "-c", config, "--work-dir", work_dir, "--resume"]
    if amp:
        args.append("--amp")
    if compile:
        args.append("--compile")
    if channels_last:
        args.append("--channels-last")
    if overrides:
        args += ["-o", *overrides]
    return f"interrupted; the last good checkpoint is {checkpoint}; continue with --resume: {shlex.join(args)}"
