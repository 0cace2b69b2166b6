"""Command lines whose flags depend on the config's task (``tools/infer.py``, ``tools/export.py``).

Why one module: both tools first read ``-c`` (and its ``-o key=value`` overrides), find the task of its
``default_scope`` (:func:`oars.tasks.get_task`), let the task add its flags in an argument group of its own, then
parse the whole line; a flag of another task is one message naming both tasks, not argparse's "unrecognized
arguments". ``tools/TOOL.py -c CONFIG --help`` therefore lists the flags of that config's task.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from oars.errors import OarsError
from oars.tasks import TASKS, ArgumentContainer, Task, get_task

AddFlags = Callable[[Task, ArgumentContainer], None]


@dataclass
class TaskCommandLine:
    """A parsed command line: the arguments, the loaded config, its task and the values of the task's own flags.

    Attributes:
        args: every parsed argument (the task's flags included, None when not given).
        cfg: the config of ``-c`` with the ``-o key=value`` overrides applied.
        task: the config's task.
        task_values: ``dest -> value`` of the task's flags that were given (not None).
    """

    args: argparse.Namespace
    cfg: Any
    task: Task
    task_values: dict[str, Any]


def parse_task_command_line(parser: argparse.ArgumentParser, argv: Sequence[str] | None, add_flags: AddFlags,
                            tool: str, load: Callable[[str, list[str]], Any]) -> TaskCommandLine:
    """Parse ``argv`` with ``parser`` plus the flags ``add_flags(task, group)`` adds for the config's task.

    Args:
        parser: the tool's parser with its common flags; it must have ``-c/--config`` and ``-o/--opt``
            (``dest='values'``: the output folder and ``key=value`` overrides).
        argv: the command line (None: ``sys.argv[1:]``).
        add_flags: adds a task's flags, e.g. ``lambda task, group: task.default_kind.predictor.infer_arguments(group)``.
        tool: the tool's file name without ``.py``, for messages (``infer``).
        load: loads the config with overrides (``oars.config.check.load_checked_config``).

    Returns:
        :class:`TaskCommandLine`.

    Raises:
        OarsError: the config's scope has no task, or a flag belongs to another task (naming both).
        SystemExit: argparse's own errors and ``--help``.
    """
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("-c", "--config", default=None)
    pre.add_argument("-o", "--opt", dest="values", nargs="+", action="extend", default=[])
    known, _ = pre.parse_known_args(argv)
    cfg = task = None
    group_actions: list[argparse.Action] = []
    if known.config:  # without -c, the full parse below says it is required (and --help lists the common flags)
        cfg = load(known.config, [v for v in known.values if "=" in v])
        scope = cfg.get("default_scope")
        task = get_task(scope, where=known.config)
        group = parser.add_argument_group(f"{scope} flags")
        add_flags(task, group)
        group_actions = list(group._group_actions)  # noqa: SLF001  (argparse has no public accessor)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        _refuse_unknown(parser, unknown, task, args.config, add_flags, tool)
    if cfg is None or task is None:  # not reached: -c is required, so parse_known_args stopped already
        parser.error("the following arguments are required: -c/--config")
    values = {a.dest: getattr(args, a.dest) for a in group_actions if getattr(args, a.dest, None) is not None}
    return TaskCommandLine(args=args, cfg=cfg, task=task, task_values=values)


def task_flags(task: Task, add_flags: AddFlags) -> set[str]:
    """The option strings ``add_flags`` adds for ``task``."""
    probe = argparse.ArgumentParser(add_help=False)
    add_flags(task, probe)
    return {s for action in probe._actions for s in action.option_strings}  # noqa: SLF001


def _refuse_unknown(parser: argparse.ArgumentParser, unknown: list[str], task: Task | None, config: str,
                    add_flags: AddFlags, tool: str) -> None:
    """A flag of another task is a clear error naming the config's scope; anything else is argparse's own."""
    for flag in (u.split("=", 1)[0] for u in unknown if u.startswith("--")):
        owners = [scope for scope in sorted(TASKS)
                  if TASKS[scope] is not task and flag in task_flags(TASKS[scope], add_flags)]
        if owners and task is not None:
            raise OarsError(f"{flag} does not apply to default_scope {task.scope!r} (it is a flag of "
                            f"{', '.join(owners)}; see tools/{tool}.py -c {config} --help)")
    parser.error(f"unrecognized arguments: {' '.join(unknown)}")
