"""Shared command-line plumbing for ``tools/*.py``: the PaddleDetection/MMDetection-style flags
and clean error output (the message, no traceback, exit status 2)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from oars.errors import OarsError
from oars_deploy.errors import UserError


def base_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("-c", "--config", required=True, help="YAML config file")
    parser.add_argument("-o", "--opt", dest="overrides", nargs="+", action="extend", default=[],
                        metavar="KEY=VALUE", help="override config keys, e.g. -o train_cfg.max_epochs=2 "
                        "optim_wrapper.optimizer.lr=0.01 (values are parsed as YAML)")
    parser.add_argument("--work-dir", default=None, help="folder for logs, checkpoints and results")
    return parser


def split_output_and_overrides(values: list[str], output_dir: str | None,
                               default: str | None = None) -> tuple[str, list[str]]:
    """``-o`` values -> (the one output folder, the ``key=value`` overrides); ``default`` when no folder is given
    (None: a folder is required)."""
    overrides = [v for v in values if "=" in v]
    plain = [v for v in values if "=" not in v]
    if output_dir:
        plain.append(output_dir)
    if not plain and default is not None:
        return default, overrides
    if len(plain) != 1:
        raise OarsError(f"-o: expected exactly one output folder (and any key=value overrides), got {plain or 'none'}")
    return plain[0], overrides


def run_cli(main: Callable[[], object]) -> None:
    """Run a tool's main; print user errors plainly (set OARS_DEBUG=1 for the traceback)."""
    try:
        main()
    except UserError as err:
        if os.environ.get("OARS_DEBUG"):
            raise
        print(f"error: {user_message(err)}", file=sys.stderr)
        sys.exit(2)


def user_message(err: BaseException) -> str:
    """The message alone; for an error re-raised from a DataLoader worker, its last line (the
    worker's own message) instead of the worker's traceback text."""
    text = str(err)
    if "Original Traceback" in text:
        last = [line for line in text.strip().splitlines() if line.strip()][-1]
        return last.split(": ", 1)[1] if ": " in last else last
    return text
