"""One command a task adds to a thin ``tools/*.py`` entry point (a converter, a data check, a demo-data set).

Kept apart from :mod:`oars.tasks` (which re-exports it) so the contract's module stays about the contract; this
module imports nothing heavy either.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Subcommand:
    """One command a task adds to a ``tools/*.py`` entry point (a converter, a data check).

    Attributes:
        tool: the entry point it belongs to, the file name without ``.py`` (``"convert"`` -> ``tools/convert.py``).
        name: its name under that tool (``tools/convert.py voc2coco``); for a tool that runs a single command
            (``tools/check_videos.py``) the tool's name.
        help: one line for the tool's list of commands.
        add_arguments: adds the command's flags to the (sub)parser the tool made for it.
        run: does the work with the parsed arguments; user errors are :class:`OarsError` s.
        usage: example command lines for the tool's ``--help`` (the tool's description is built from them).
        check_outputs: called by the tool before ``run``, before anything is read: refuses an output that would
            replace an input, or an existing file without ``--overwrite`` (the rule every tool that writes follows).
    """

    tool: str
    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], object]
    usage: str = ""
    check_outputs: Callable[[argparse.Namespace], None] | None = None
