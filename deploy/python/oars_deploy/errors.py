"""The base of every user-facing error in oars and its runtime, and the command-line wrapper that prints them.

Command-line tools (``tools/*.py`` and ``oars-infer``) print the message alone, without a traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable


class UserError(Exception):
    """An error whose message alone tells the user what to fix (no traceback needed)."""


class DeployError(UserError):
    """A deploy folder, an input or a runtime that cannot be used; the message says what was expected."""


def user_message(err: BaseException) -> str:
    """The message alone; for an error re-raised from a DataLoader worker, its last line (the
    worker's own message) instead of the worker's traceback text."""
    text = str(err)
    if "Original Traceback" in text:
        last = [line for line in text.strip().splitlines() if line.strip()][-1]
        return last.split(": ", 1)[1] if ": " in last else last
    return text


def run_cli(main: Callable[[], object]) -> None:
    """Run a tool's main; print user errors plainly and exit with status 2 (set OARS_DEBUG=1 for the traceback)."""
    try:
        main()
    except UserError as err:
        if os.environ.get("OARS_DEBUG"):
            raise
        print(f"error: {user_message(err)}", file=sys.stderr)
        sys.exit(2)
