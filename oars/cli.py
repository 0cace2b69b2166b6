"""Shared command-line plumbing for ``tools/*.py``: the PaddleDetection/MMDetection-style flags
and clean error output (the message, no traceback; exit status 2 for user errors)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from oars.errors import OarsError
from oars_deploy.errors import UserError, user_message  # user_message: one implementation with oars-infer
from oars_deploy.errors import run_cli as _print_user_errors


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
    """Run a tool's main: user errors print their message (status 2, as oars_deploy's ``run_cli``), a user error
    with an ``exit_code`` exits with it (Ctrl-C during training: 130), and an error raised while a loop ran prints
    where it happened with its type and message (status 1). OARS_DEBUG=1 shows the tracebacks instead.

    Only the first Ctrl-C counts (:func:`_first_ctrl_c_only`): pressed again while the first one is handled, it
    would otherwise end the tool with a KeyboardInterrupt traceback instead of the message that names the
    checkpoint to resume from."""
    with _first_ctrl_c_only():
        _print_user_errors(lambda: _print_run_errors(main))


@contextmanager
def _first_ctrl_c_only() -> Iterator[None]:
    """While the block runs, the first SIGINT raises KeyboardInterrupt (as Python's own handler does) and makes the
    process ignore later ones: from then on the tool is ending, and what it does on the way out (removing an atomic
    write's temporary file, finding the last good checkpoint, printing the resume command, exiting 130) finishes.

    After a Ctrl-C, SIGINT stays ignored (the tool exits; restoring the handler would let a Ctrl-C land in the
    interpreter's exit, e.g. while multiprocessing joins its workers). Without one, the handler that was there is
    put back, for callers that run a tool's main in-process. Nothing changes outside the main thread (handlers
    cannot be set there) or where SIGINT is not Python's default (ignored in a background job, or the embedding
    program's own handler).
    """
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    signal.signal(signal.SIGINT, _interrupt_once)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGINT) is _interrupt_once:  # no Ctrl-C came
            signal.signal(signal.SIGINT, signal.default_int_handler)


def _interrupt_once(signum: int, frame: object) -> None:
    """SIGINT handler: ignore the ones after this, then stop what runs as Python's default handler does."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def _print_run_errors(main: Callable[[], object]) -> None:
    try:
        main()
    except Exception as err:
        if os.environ.get("OARS_DEBUG"):
            raise
        if isinstance(err, UserError):
            code = getattr(err, "exit_code", None)
            if code is None:
                raise
            print(f"error: {user_message(err)}", file=sys.stderr)
            sys.exit(code)
        from oars.engine.run_errors import WHERE_ATTR

        where = getattr(err, WHERE_ATTR, None)
        if where is None:
            raise
        print(f"error: {where}: {type(err).__name__}: {user_message(err)}\n  (raised while the run was going, "
              "not while it was set up from the config; OARS_DEBUG=1 shows the traceback)", file=sys.stderr)
        sys.exit(1)
