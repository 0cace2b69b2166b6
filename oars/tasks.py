"""The task contract: how a task package (detection, segmentation, ...) plugs into the core and the tools.

A task registers ONE object, an instance of a :class:`Task` subclass, as a Python entry point of the group
``oars.tasks`` (``[project.entry-points."oars.tasks"]`` in pyproject.toml: ``<scope> = "<package>.task:TASK"``),
the way pytest finds its plugins. The core and ``tools/*.py`` reach a task only through :data:`TASKS` /
:func:`get_task`, keyed by the config's ``default_scope``: they never import a task package, never probe module
names (``import_module(f"{scope}.export")``) and never branch on a task's name. Tests (and a task that is not an
installed distribution) register one with :meth:`TaskRegistry.register`.

What a task declares here (each method says who calls it and why):

- export (always through the core exporter, any number of named graph inputs): :meth:`Task.build_export_spec`
  (abstract), :meth:`Task.export_options`, :meth:`Task.preprocess_steps` (None by default: the exporter's image
  defaults), :meth:`Task.check_export`, and the task's ``tools/export.py`` flags :meth:`Task.export_arguments`;
- ``tools/infer.py``: :meth:`Task.infer_arguments` (its own flags), :meth:`Task.requires_input`,
  :meth:`Task.infer` (abstract);
- registries, data checks and the report: :meth:`Task.import_registries` (abstract), :meth:`Task.check_dataset`,
  :meth:`Task.report_hook` (what ``tools/eval.py --report`` adds to the run);
- its own commands: :meth:`Task.subcommands` (converters, data checks) that the thin ``tools/*.py`` entry points
  look up with :func:`tool_commands` / :func:`tool_command`.
- data and result tools (:class:`oars.task_tools.TaskToolHooks`, which :class:`Task` inherits):
  ``draw_pipeline_sample`` (``tools/browse_dataset.py``), ``result_records`` (``tools/eval.py --out``),
  ``prediction_from_export`` (``tools/eval.py --model-dir``) and ``predict_inputs`` (``oars.Model.predict``).

This module imports nothing heavy (no torch): ``tools/convert.py --help`` lists the commands of every task
without loading a model library; a task's ``task.py`` imports its own code inside the methods, for the same reason.
It is a leaf of the core: its defaults call nothing above it (the exporter asks a task and falls back to its own
defaults, :mod:`oars.export.options`), so everything may import it and it closes no import circle.
"""

from __future__ import annotations

import abc
import argparse
import threading
from collections.abc import Iterator, Mapping
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from oars.errors import OarsError
from oars.subcommands import Subcommand  # noqa: F401  (part of this module's interface: tasks build these)
from oars.task_tools import TaskToolHooks

if TYPE_CHECKING:
    import torch
    from mmengine.config import Config

    from oars.export.spec import ExportOptions, ExportSpec
    from oars_deploy.failures import Failures

ENTRY_POINT_GROUP = "oars.tasks"

# what ``parser.add_argument_group()`` returns as well as a parser: both take ``add_argument``
ArgumentContainer = argparse._ActionsContainer


class UnknownTaskError(OarsError, KeyError):
    """A ``default_scope`` that no registered task serves (the message names the scope and the known tasks)."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0]) if self.args else ""


class Task(TaskToolHooks, abc.ABC):
    """The contract object of one task package; subclass it in ``<package>/task.py`` as ``TASK = MyTask()``.

    Abstract: :attr:`scope`, :meth:`import_registries`, :meth:`build_export_spec`, :meth:`infer`. The rest have
    defaults that suit a task whose model takes one image (the core's image export, no extra flags, no checks).
    """

    #: the ``default_scope`` of the task's configs and the scope of its registries; also the entry point's name
    scope: str = ""

    # ------------------------------------------------------------------------------------------------ registries
    @abc.abstractmethod
    def import_registries(self) -> None:
        """Import the module that creates the task's child registries (``<package>/registry.py``).

        Called by the config checks (``oars.config``) before they look a ``type`` up in the scope's registries:
        mmengine creates a scope's registries only when that module is imported, and the core may not import it
        by name.
        """

    # ---------------------------------------------------------------------------------------------------- export
    @abc.abstractmethod
    def build_export_spec(self, model: torch.nn.Module, cfg: Config, options: ExportOptions) -> ExportSpec:
        """What the core exporter traces and writes: the module (in eval mode after this), its named input and
        outputs, deploy.yaml's ``outputs``/``postprocess`` (and more sections), and how the self-check compares
        ONNX Runtime with PyTorch (``ExportSpec.compare``, ``atol``, ``sample_inputs``).

        Args:
            model: the model built from ``cfg`` with the checkpoint loaded (``oars.pipelines.model.init_model``).
            cfg: the resolved config.
            options: what :meth:`export_options` made of the user's flags and ``cfg.export``.

        Returns:
            The :class:`oars.export.spec.ExportSpec`.

        Raises:
            oars.export.ExportError: a model or config the task cannot export, naming the config and the fix.
        """

    def export_options(self, cfg: Config, dynamic: bool, opset: int) -> ExportOptions | None:
        """The export's fixed input shape and options from ``cfg.export`` (called before the model is built, so
        a missing or wrong export section is a cheap error).

        The default returns None: the exporter then reads an image model's ``export.input_shape`` ``[B, 3, H, W]``
        itself (:func:`oars.export.options.task_export_options`; the contract calls nothing above it). A task
        whose input is not one image (clips, features, noise) overrides it.

        Args:
            cfg: the resolved config.
            dynamic: ``--dynamic`` (a dynamic batch axis).
            opset: ``--opset``.

        Returns:
            :class:`oars.export.spec.ExportOptions`, or None for the exporter's image default.
        """
        return None

    def preprocess_steps(self, cfg: Config) -> list[dict] | None:
        """deploy.yaml's ``preprocess`` steps from the config's test pipeline (called before the model is built:
        a pipeline that cannot be exported is an early error).

        The default returns None: the exporter then derives an image pipeline's steps itself
        (:func:`oars.export.options.task_preprocess_steps`).

        Returns:
            The steps, in the schema of ``oars.export.deploy_config``, or None for the exporter's image default.
        """
        return None

    def check_export(self, cfg: Config, fmt: str, precision: str) -> None:
        """Refuse an export the task cannot make (a format or a precision its graphs do not support), before the
        model is built. The core has checked the flags themselves. The default accepts everything.

        Args:
            cfg: the resolved config.
            fmt: ``--format`` (``onnx`` or ``tensorrt``).
            precision: ``fp32``, ``fp16`` (``--half``) or ``int8`` (``--int8``).

        Raises:
            oars.export.ExportError: naming the config, what is not supported and what to do instead.
        """
        return None

    def export_arguments(self, parser: ArgumentContainer) -> None:
        """Add the task's own ``tools/export.py`` flags to ``parser`` (an argument group shown by
        ``tools/export.py -c CONFIG --help``). Give each a ``default=None``: the values that were given reach
        :meth:`export_options` / :meth:`build_export_spec` in ``ExportOptions.extra`` under their ``dest``, over the
        same key of ``cfg.export``. The default adds none."""
        return None

    # ----------------------------------------------------------------------------------------- tools/infer.py
    def infer_arguments(self, parser: ArgumentContainer) -> None:
        """Add the task's own ``tools/infer.py`` flags (e.g. ``--draw-threshold``) to ``parser`` (an argument
        group of the tool's parser). Give each a ``default=None`` so that :meth:`infer` can tell "not given".
        The default adds none."""
        return None

    def requires_input(self, cfg: Config) -> bool:
        """Whether ``tools/infer.py`` needs ``-i`` for this config: False for a model that makes pictures from
        nothing (noise GANs), whose :meth:`infer` checks its input itself. Default True."""
        return True

    @abc.abstractmethod
    def infer(self, cfg: Config, weights: str, inputs: str | None, output: str, *, device: str,
              failures: Failures, args: argparse.Namespace) -> list[str]:
        """Predict ``inputs`` with the model of ``cfg`` + ``weights`` and write the pictures (and result files)
        under ``output`` (what ``tools/infer.py`` runs).

        Args:
            cfg: the resolved config (``-o`` overrides applied).
            weights: the checkpoint.
            inputs: ``-i``: a file or a folder (None only when :meth:`requires_input` said so).
            output: the output folder.
            device: ``cpu`` or ``cuda``.
            failures: where an input that cannot be read is recorded (the others are still predicted; the tool
                lists them and exits 2 at the end).
            args: the parsed command line, holding the flags :meth:`infer_arguments` added (None when not given).

        Returns:
            The paths of the pictures written.
        """

    # ----------------------------------------------------------------------------------------------- data checks
    def check_dataset(self, cfg: Config, split: str, dataset: Any) -> None:
        """Fail at build time when a dataset disagrees with the model or the evaluators in a way only this task
        knows (segmentation: the ``ignore_index`` every head, the label padding and the IoU metric must share).

        Called by the runner for each of ``train_dataloader``/``val_dataloader``/``test_dataloader`` (``split``)
        with the dataset built lazily (``lazy_init``: its ``metainfo``, no annotations read), after the core
        checked the class count. The default checks nothing.

        Raises:
            oars.errors.OarsError: naming the config, the disagreeing keys and their values.
        """
        return None

    # ---------------------------------------------------------------------------------------------------- report
    def report_hook(self, cfg: Config, out_file: str) -> dict:
        """The hook config ``tools/eval.py --report`` adds to the test run to write ``out_file`` (report.html).

        The default is the scope's registered ``EvaluationReportHook`` (shared HTML layout in
        ``oars.visualization.html_report``, the task's own tables and pictures); a task without one overrides this
        to raise :class:`oars.errors.OarsError` saying so.
        """
        return {"type": "EvaluationReportHook", "out_file": out_file}

    # --------------------------------------------------------------------------------------------- subcommands
    def subcommands(self) -> list[Subcommand]:
        """The commands the task adds to ``tools/*.py`` entry points: converters (``tools/convert.py``), data checks
        (``tools/check_videos.py``), its demo-data generators (``tools/demo_data.py``). Default none."""
        return []


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
        for command in TASKS[scope].subcommands():
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
