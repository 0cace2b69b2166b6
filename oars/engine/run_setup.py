"""Setting up a run goes one way: load → validate once → resolve the engine's defaults → (build).

Training, evaluation and ``--print-config`` all take this path, so they see the same config, raise the same
errors in the same order (what the user wrote first, then what the flags ask for), and the config is
checked exactly once. Building the Runner (``runner.build_runner``) is the last step and is left to the
caller: ``--print-config`` stops before it.
"""

from __future__ import annotations

from collections.abc import Sequence

from mmengine.config import Config

from oars.config.check import load_checked_config

from .resolve import RunOptions, resolve_engine
from .runner import config_file_text
from .validate import ALL_SPLITS, validate_config


def load(config: str, overrides: Sequence[str] = ()) -> Config:
    """Load a YAML config with ``-o`` overrides (errors name file, key and fix) through the tools' one loader,
    :func:`oars.config.check.load_checked_config`; its check is left to :func:`validated_and_resolved`, which runs
    it once on the config the run will use."""
    return load_checked_config(config, overrides, check=False)


def validated_and_resolved(cfg: Config, options: RunOptions, splits: Sequence[str] = ALL_SPLITS) -> Config:
    """Validate a loaded config once (its datasets of ``splits``: those the run uses), then resolve the engine's
    defaults on a copy (see ``resolve_engine``)."""
    validate_config(cfg, splits)
    return resolve_engine(cfg, options)


def set_up_run(config: str, overrides: Sequence[str] = (), options: RunOptions = RunOptions()) -> Config:
    """The resolved config of a run: loaded, validated once, with the engine's defaults applied and recorded."""
    return validated_and_resolved(load(config, overrides), options)


def resolved_config_text(config: str, overrides: Sequence[str] = (), options: RunOptions = RunOptions()) -> str:
    """What ``<work_dir>/config.yaml`` of this run would hold, with its ``_resolved_by_oars`` section (the
    source of every value oars set); nothing is built, written or started (``tools/train.py --print-config``)."""
    from dataclasses import replace

    return config_file_text(set_up_run(config, overrides, replace(options, dry_run=True)))
