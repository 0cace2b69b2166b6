"""The task contract: how a task package (detection, segmentation, ...) plugs into the core and the tools.

A task registers ONE object, an instance of a :class:`Task` subclass, as a Python entry point of the group
``oars.tasks`` (``[project.entry-points."oars.tasks"]`` in pyproject.toml: ``<scope> = "<package>.task:TASK"``),
the way pytest finds its plugins. The core and ``tools/*.py`` reach a task only through :data:`TASKS` /
:func:`get_task`, keyed by the config's ``default_scope``: they never import a task package, never probe module
names (``import_module(f"{scope}.export")``) and never branch on a task's name. Tests (and a task that is not an
installed distribution) register one with :meth:`TaskRegistry.register`.

A :class:`Task` is narrow: its ``scope``, :meth:`Task.import_registries`, its :class:`~oars.task_roles.Commands`
(subcommands, hub converters) and one or more model kinds (:class:`ModelKind`), each with its own typed roles
(:mod:`oars.task_roles`, in the spirit of ultralytics' ``task_map``):

- :class:`~oars.task_roles.Exporter`: ``tools/export.py`` (options, pre-processing steps, checks, the spec, INT8
  calibration inputs, its flags) and ``tools/eval.py --model-dir`` (the runtime predictor, its inputs, the
  predictions put back into the samples);
- :class:`~oars.task_roles.Predictor`: ``tools/infer.py`` (its flags, ``-i`` required or not, the run),
  ``oars.Model.predict`` and streams;
- :class:`~oars.task_roles.Data`: dataset checks, ``tools/browse_dataset.py`` pictures, ``tools/eval.py --out``
  records and ``--report``'s hook.

The core picks a config's kind with :meth:`Task.kind`: the first kind whose :meth:`ModelKind.matches` says yes,
the task's default kind (the first listed) otherwise, so no task branches on a config's kind itself (video: clip
recognisers, feature classifiers, temporal localisers). A tool's own flags are those of the task's default kind.

This module imports nothing heavy (no torch): ``tools/convert.py --help`` lists the commands of every task
without loading a model library; a task's ``task.py`` imports its own code inside the methods, for the same reason.
It is a leaf of the core: its defaults call nothing above it (the exporter asks a task and falls back to its own
defaults, :mod:`oars.export.options`), so everything may import it and it closes no import circle.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from oars.errors import OarsError
from oars.subcommands import Subcommand
from oars.task_roles import ArgumentContainer, Commands, Data, Exporter, Predictor

__all__ = ["ArgumentContainer", "Commands", "Data", "Exporter", "ModelKind", "Predictor", "Subcommand", "TASKS",
           "Task", "TaskRegistry", "UnknownTaskError", "activate", "find_task", "get_task", "known_tasks",
           "tool_command", "tool_commands"]

ENTRY_POINT_GROUP = "oars.tasks"


class UnknownTaskError(OarsError, KeyError):
    """A ``default_scope`` that no registered task serves (the message names the scope and the known tasks)."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class ModelKind:
    """One kind of model a task serves, with its roles.

    Args:
        name: what messages call it (``clip recogniser``).
        exporter: its :class:`~oars.task_roles.Exporter`.
        predictor: its :class:`~oars.task_roles.Predictor`.
        data: its :class:`~oars.task_roles.Data` (default: the contract's defaults).
        when: the predicate on a config that selects this kind (None: only as the task's default kind).
    """

    name: str
    exporter: Exporter
    predictor: Predictor
    data: Data = field(default_factory=Data)
    when: Callable[[Any], bool] | None = None

    def matches(self, cfg: Any) -> bool:
        """Whether ``cfg`` is a config of this kind of model (:attr:`when`; False without one)."""
        return self.when is not None and bool(self.when(cfg))


class Task(abc.ABC):
    """The contract object of one task package; subclass it in ``<package>/task.py`` as ``TASK = MyTask()``.

    Abstract: :meth:`import_registries`. Set :attr:`scope`, :attr:`kinds` (at least one :class:`ModelKind`, the
    first the default) and, when the task adds commands or hub converters, :attr:`commands`.
    """

    #: the ``default_scope`` of the task's configs and the scope of its registries; also the entry point's name
    scope: str = ""
    #: the kinds of model the task serves, in the order :meth:`kind` tries them; the first is the default kind
    kinds: Sequence[ModelKind] = ()
    #: what the task adds to the tools (subcommands, hub converters)
    commands: Commands = Commands()
    #: ``oars.Model.val``'s friendly metric names, ultralytics-style: ``{"box.map50": "coco/bbox_mAP_50"}``
    metric_aliases: Mapping[str, str] = {}

    @abc.abstractmethod
    def import_registries(self) -> None:
        """Import the module that creates the task's child registries (``<package>/registry.py``).

        Called by the config checks (``oars.config``) before they look a ``type`` up in the scope's registries:
        mmengine creates a scope's registries only when that module is imported, and the core may not import it
        by name.
        """

    @property
    def default_kind(self) -> ModelKind:
        """The first of :attr:`kinds`: the kind of a config no kind's predicate matches, and the one whose roles
        give the tools' flags."""
        return self.kinds[0]

    def kind(self, cfg: Any) -> ModelKind:
        """The kind of ``cfg``'s model: the first of :attr:`kinds` that :meth:`ModelKind.matches` it, else
        :attr:`default_kind`. Its roles learn the task's scope here (for their messages)."""
        kind = next((k for k in self.kinds if k.matches(cfg)), self.default_kind)
        for role in (kind.exporter, kind.predictor, kind.data):
            if not role.scope:
                role.scope = self.scope
        return kind

    def exporter(self, cfg: Any) -> Exporter:
        """The exporter of ``cfg``'s kind."""
        return self.kind(cfg).exporter

    def predictor(self, cfg: Any) -> Predictor:
        """The predictor of ``cfg``'s kind."""
        return self.kind(cfg).predictor

    def data(self, cfg: Any) -> Data:
        """The data role of ``cfg``'s kind."""
        return self.kind(cfg).data


# --------------------------------------------------------------------------------------------------- registry
class TaskRegistry(Mapping[str, Task]):
    """``scope -> Task``, filled from the ``oars.tasks`` entry points on first use, plus what :meth:`register`
    adds. An entry point that fails to load is remembered with its error and reported when its scope is asked
    for (one broken task does not hide the others); a second task for a scope is an error, not an overwrite."""

    def __init__(self, group: str = ENTRY_POINT_GROUP) -> None:
        self.group = group
        self._tasks: dict[str, Task] = {}
        self._broken: dict[str, str] = {}  # entry point name -> why it could not be loaded
        self._loaded = False
        self._lock = threading.RLock()

    def _load(self) -> None:
        with self._lock:
            if self._loaded:
                return
            self._loaded = True
            for ep in entry_points(group=self.group):
                if ep.name in self._tasks or ep.name in self._broken:
                    continue  # a distribution seen twice on sys.path (an editable install beside a build)
                try:
                    task = ep.load()
                except Exception as err:  # noqa: BLE001 - reported when the scope is asked for
                    self._broken[ep.name] = f"loading {ep.value} failed: {type(err).__name__}: {err}"
                    continue
                problem = _problem(task, ep.name)
                if problem:
                    self._broken[ep.name] = f"{ep.value}: {problem}"
                    continue
                self._tasks[task.scope] = task

    def register(self, task: Task) -> Task:
        """Add ``task`` under ``task.scope`` (a task defined in a test, or in code that is not installed).

        Returns:
            ``task``, so a definition can read ``TASK = TASKS.register(MyTask())``.

        Raises:
            OarsError: ``task`` is not a :class:`Task`, has no scope, or its scope is taken.
        """
        self._load()
        problem = _problem(task, getattr(task, "scope", None))
        if problem:
            raise OarsError(f"cannot register {task!r} as a task: {problem}")
        with self._lock:
            if task.scope in self._tasks:
                raise OarsError(f"task scope {task.scope!r} is registered already (by {self._tasks[task.scope]!r}); "
                                "one task per scope")
            self._tasks[task.scope] = task
        return task

    def unregister(self, scope: str) -> None:
        """Remove a task registered with :meth:`register` (tests clean up after themselves)."""
        with self._lock:
            self._tasks.pop(scope, None)

    def broken(self) -> dict[str, str]:
        """Entry points that could not be loaded: name -> the reason."""
        self._load()
        return dict(self._broken)

    def __getitem__(self, scope: str) -> Task:
        self._load()
        return self._tasks[scope]

    def __iter__(self) -> Iterator[str]:
        self._load()
        return iter(list(self._tasks))

    def __len__(self) -> int:
        self._load()
        return len(self._tasks)


def _problem(task: object, name: str | None) -> str:
    """Why ``task`` cannot be the task registered as ``name`` ("" when it can)."""
    if not isinstance(task, Task):
        return f"expected an instance of oars.tasks.Task, got {type(task).__name__}"
    if not task.scope:
        return f"{type(task).__name__}.scope is empty"
    if not task.kinds or not all(isinstance(k, ModelKind) for k in task.kinds):
        return f"{type(task).__name__}.kinds must list at least one oars.tasks.ModelKind"
    if name is not None and task.scope != name:
        return f"its scope is {task.scope!r} but it is registered as {name!r} (they must be the same)"
    return ""


TASKS = TaskRegistry()


def known_tasks() -> str:
    """The registered scopes, for messages (``"detection, gan, ..."`` or ``"none"``)."""
    return ", ".join(sorted(TASKS)) or "none"


def find_task(scope: str | None) -> Task | None:
    """The task registered for ``scope``, or None (for callers to whom a scope without a task is fine)."""
    return TASKS.get(scope) if scope else None


def activate(scope: str | None) -> Task | None:
    """Let the task of ``scope`` create its registries before anything is built in that scope; returns the task
    (None for a scope no task serves: the build then reports the unknown types itself).

    Why: mmengine finds a scope's registries by importing ``<scope>.registry``, which only works when a task's
    package is named like its scope; every place that builds a model, a pipeline or a data preprocessor from a
    config calls this first, so a task installed under any package name works.
    """
    task = find_task(scope)
    if task is not None:
        task.import_registries()
    return task


def get_task(scope: str | None, where: str | None = None) -> Task:
    """The task registered for ``scope`` (a config's ``default_scope``).

    Args:
        scope: the scope.
        where: what to name first in the message (the config file), if anything.

    Raises:
        UnknownTaskError: one message naming the scope, why it failed to load when its entry point is broken,
            and the known tasks.
    """
    task = find_task(scope)
    if task is not None:
        return task
    prefix = f"{where}: " if where else ""
    if not scope:
        raise UnknownTaskError(f"{prefix}no default_scope: set it to the task the config is for (known tasks: "
                               f"{known_tasks()})")
    broken = TASKS.broken().get(scope)
    if broken:
        raise UnknownTaskError(f"{prefix}the task of default_scope {scope!r} cannot be loaded: {broken}")
    raise UnknownTaskError(f"{prefix}default_scope {scope!r} is not a registered task (known tasks: {known_tasks()}; "
                           f"a task registers itself as an {ENTRY_POINT_GROUP!r} entry point of its distribution "
                           "and appears after `pip install -e .`)")


def tool_commands(tool: str) -> dict[str, Subcommand]:
    """Every registered task's commands for ``tools/<tool>.py``, by name, in the tasks' order (sorted scopes).

    Raises:
        OarsError: two tasks give a command of the same name to the same tool.
    """
    found: dict[str, tuple[str, Subcommand]] = {}
    for scope in sorted(TASKS):
        for command in TASKS[scope].commands.subcommands():
            if command.tool != tool:
                continue
            if command.name in found:
                raise OarsError(f"tools/{tool}.py {command.name}: given by both task {found[command.name][0]!r} "
                                f"and task {scope!r}; rename one")
            found[command.name] = (scope, command)
    return {name: command for name, (_, command) in found.items()}


def tool_command(tool: str) -> Subcommand:
    """The one command of a single-command tool (``tools/check_videos.py``).

    Raises:
        OarsError: no registered task gives it (the message names the known tasks), or more than one does.
    """
    commands = tool_commands(tool)
    if len(commands) != 1:
        given = f"{len(commands)} commands ({', '.join(commands)})" if commands else "no command"
        raise OarsError(f"tools/{tool}.py: the registered tasks give {given} for it, expected one (known tasks: "
                        f"{known_tasks()}; `pip install -e .` registers the tasks of this checkout)")
    return next(iter(commands.values()))
