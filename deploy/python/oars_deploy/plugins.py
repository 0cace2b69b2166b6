"""Predictor plug-ins: one per kind of output, found by deploy.yaml's ``predictor`` key.

The runtime core (deploy.yaml's common schema, pre-processing, backends, files) names no task; what differs
between kinds of models lives in a plug-in: :class:`PredictorPlugin` validates its own deploy.yaml section, adds
its ``oars-infer`` flags, runs the model over the inputs, writes its pictures (and its compatibility files such as
detections.json) and returns one :class:`~oars_deploy.records.ResultRecord` per input, which the CLI writes to
results.jsonl. The built-in plug-ins (:mod:`oars_deploy.predictors`) are ``detection_boxes``, ``instance_masks``,
``semantic_labels``, ``clip_classes``, ``feature_classes``, ``gan_images`` and ``video_segments``; another one is
added with :func:`register_predictor` and named in its exports' deploy.yaml, or declared in the ``oars.predictors``
entry-point group. The built-ins are listed by module name (:data:`DEFAULT_PREDICTORS`, as pytest's
``default_plugins``) and imported on the first lookup, so this module imports no plug-in: the plug-ins import it.

What the core does beyond ``run`` with a plug-in, it asks the plug-in for (a capability, not an ``isinstance`` of a
plug-in class): :attr:`PredictorPlugin.tracks` (``--track``), :meth:`PredictorPlugin.run_windows` (``--window``),
:meth:`PredictorPlugin.served_model` (``oars-serve``, ``oars-infer --ray``), :meth:`PredictorPlugin.list_inputs`
and :meth:`PredictorPlugin.output_stems` (``oars-infer --ray``).

deploy.yaml's ``predictor`` key is written by ``oars_deploy.deploy_writer.write_deploy_yaml`` from
:func:`predictor_kind`; an export written before the key existed gets the same answer from the same function
(:func:`predictor_name`), so old export folders keep loading.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from oars_deploy.errors import DeployError
from oars_deploy.failures import Failures
from oars_deploy.image_files import list_images
from oars_deploy.records import ResultRecord

__all__ = ["DEFAULT_PREDICTORS", "PREDICTOR_KEY", "PredictorPlugin", "PredictorRun", "add_all_arguments", "add_flag",
           "get_predictor", "predictor_for", "predictor_kind", "predictor_name", "predictor_names",
           "register_predictor"]

PREDICTOR_KEY = "predictor"  # deploy.yaml's key naming the plug-in that runs the model (inferred when absent)
# The built-in plug-ins, by module name, imported on the first lookup (importing one registers it). Their order is
# that of their ``oars-infer`` flags in ``--help``.
DEFAULT_PREDICTORS: tuple[str, ...] = (
    "oars_deploy.predictors.clip_classes",
    "oars_deploy.predictors.detection_boxes",
    "oars_deploy.predictors.feature_classes",
    "oars_deploy.predictors.gan_images",
    "oars_deploy.predictors.instance_masks",
    "oars_deploy.predictors.semantic_labels",
    "oars_deploy.predictors.video_segments",
)


@dataclass
class PredictorRun:
    """What one ``oars-infer`` run of a plug-in produced.

    Attributes:
        records: one result record per input, in input order (the CLI writes them to results.jsonl).
        failures: the inputs that could not be handled (the CLI raises their summary after writing the records).
        total: how many inputs there were in all (failed ones included), for "N of M".
        pictures: the pictures written, in input order (image plug-ins; empty where a kind writes none per input).
    """

    records: list[ResultRecord] = field(default_factory=list)
    failures: Failures = field(default_factory=Failures)
    total: int = 0
    pictures: list[str] = field(default_factory=list)


class PredictorPlugin(ABC):
    """One kind of output: its deploy.yaml section, its flags, its run and its records.

    Class attributes:
        name: the deploy.yaml ``predictor`` value (registered with :func:`register_predictor`).
        section: the top-level deploy.yaml key this kind owns (``gan``, ``sampling``, ``features``), or None; an
            export that has the key belongs to this plug-in (how old exports without ``predictor`` are read).
        describes: what the models are, for messages (``GAN generators``, ``video classifiers``).
        needs_input: whether ``-i`` is required (noise generators read nothing).
        tracks: whether its per-image results are ``{'bboxes', 'scores', 'labels'}`` that ``--track`` (ByteTrack,
            :mod:`oars_deploy.track`) can follow over a stream's frames.
        windows: whether it classifies a stream window by window (``--window``, :meth:`run_windows`).
    """

    name: ClassVar[str] = ""
    section: ClassVar[str | None] = None
    describes: ClassVar[str] = ""
    needs_input: ClassVar[bool] = True
    tracks: ClassVar[bool] = False
    windows: ClassVar[bool] = False

    def claims(self, deploy: dict) -> bool:
        """Whether an export without a ``predictor`` key is of this kind (see :func:`predictor_kind`).

        The default: the export has this plug-in's :attr:`section`. Plug-ins without a section (image models)
        override it; they are asked only when no section plug-in claimed the export."""
        return self.section is not None and self.section in deploy

    def validate(self, deploy: dict, path: str) -> None:
        """Check this kind's part of ``deploy`` (its section, input and pre-processing); raise
        :class:`DeployError` naming ``path`` and the key. The common keys are checked already."""
        return None

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add this kind's ``oars-infer`` flags to ``parser`` (use :func:`add_flag`: a flag two kinds share, such
        as ``--topk``, is added once)."""
        return None

    @abstractmethod
    def run(self, args: argparse.Namespace, deploy: dict) -> PredictorRun:
        """Predict ``args.input`` with the model of ``args.model_dir`` (deploy.yaml already read as ``deploy``):
        check this kind's flags, write the pictures into ``args.output_dir``, return the records and failures.

        Raises:
            DeployError / UserError: a flag that does not apply, an input of the wrong kind (before anything is
                predicted).
        """

    def run_windows(self, args: argparse.Namespace, source: Any) -> PredictorRun:
        """Classify the stream ``source`` (:class:`oars_deploy.streams.source.StreamSource`) window by window
        (``--window``; :func:`oars_deploy.streams.windows.run_windows`). Only plug-ins with :attr:`windows` do."""
        raise DeployError(f"--window applies to video classifiers, not to {self.describes or self.name} "
                          f"(predictor {self.name!r})")

    def served_model(self) -> type | None:
        """The :class:`oars_deploy.serve.models.ServedModel` class that serves this kind (``oars-serve``,
        ``oars-infer --ray``), or None: not served. Imported when asked for, so the server's modules load only in
        the server."""
        return None

    def list_inputs(self, spec: str) -> list[str]:
        """The input files of ``-i spec``, a file or a folder (the default: images, :func:`list_images`)."""
        return list_images(spec)

    def output_stems(self, paths: list[str], input_flag: str = "-i") -> dict[str, str]:
        """``{path: output stem}`` of inputs whose pictures are named after them; ``{}`` (the default) when this
        kind's records name no file of an input."""
        return {}


_PLUGINS: dict[str, PredictorPlugin] = {}
_BUILTINS_LOADED = False
_BROKEN: dict[str, str] = {}  # entry-point plug-ins that failed to load: name -> why
P = TypeVar("P", bound=type[PredictorPlugin])


def register_predictor(name: str) -> Callable[[P], P]:
    """Class decorator: register a :class:`PredictorPlugin` subclass under ``name`` (deploy.yaml ``predictor``).

    Raises:
        ValueError: ``name`` is registered already (a duplicate is an error, not a silent overwrite).
    """

    def decorate(cls: P) -> P:
        if name in _PLUGINS and type(_PLUGINS[name]) is not cls:
            raise ValueError(f"predictor {name!r} is registered already ({type(_PLUGINS[name]).__qualname__})")
        cls.name = name
        _PLUGINS[name] = cls()
        return cls

    return decorate


ENTRY_POINT_GROUP = "oars.predictors"  # ``name = "module:PluginClass"`` of installed tasks' runtime plug-ins


def _load_builtins() -> None:
    """Import the built-in plug-ins once (:data:`DEFAULT_PREDICTORS`, by name: they import this module), then
    the plug-ins other distributions declare in the ``oars.predictors`` entry-point group (a task installed beside
    oars names its own predictor in its exports; ``oars-infer`` must find it without an edit here). A plug-in that
    fails to load is reported when its name is asked for, not at start-up, so one broken package does not stop the
    others."""
    global _BUILTINS_LOADED
    if _BUILTINS_LOADED:
        return
    _BUILTINS_LOADED = True
    for module in DEFAULT_PREDICTORS:
        importlib.import_module(module)  # registers the plug-in (@register_predictor)
    # the built-ins in DEFAULT_PREDICTORS order whatever imported one first (training code importing a plug-in's
    # records or pictures registers it early), then the others as registered: --help, messages and inference stable
    rank = {module: i for i, module in enumerate(DEFAULT_PREDICTORS)}
    ordered = sorted(_PLUGINS.items(), key=lambda item: rank.get(type(item[1]).__module__, len(rank)))
    _PLUGINS.clear()
    _PLUGINS.update(ordered)
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry.name in _PLUGINS:
            continue
        try:
            plugin = entry.load()  # importing its module may register it already (@register_predictor)
            if entry.name not in _PLUGINS:
                if not (isinstance(plugin, type) and issubclass(plugin, PredictorPlugin)):
                    raise TypeError(f"expected a PredictorPlugin subclass, got {plugin!r}")
                register_predictor(entry.name)(plugin)
        except Exception as err:  # a third-party package: name it and carry on
            _BROKEN[entry.name] = f"{entry.value}: {type(err).__name__}: {err}"


def predictor_names() -> list[str]:
    """The registered predictor names, built-ins first."""
    _load_builtins()
    return list(_PLUGINS)


def get_predictor(name: str) -> PredictorPlugin:
    """The plug-in registered under ``name``.

    Raises:
        DeployError: no plug-in has that name; the message lists the known ones.
    """
    _load_builtins()
    if name in _BROKEN:
        raise DeployError(f"predictor {name!r} (entry point {ENTRY_POINT_GROUP}) failed to load: {_BROKEN[name]}")
    if name not in _PLUGINS:
        raise DeployError(f"unknown predictor {name!r}; known predictors: {', '.join(_PLUGINS)}")
    return _PLUGINS[name]


def predictor_kind(deploy: dict) -> str:
    """The predictor a deploy.yaml's content implies, whatever its ``predictor`` key says.

    A plug-in whose section is present (``gan`` -> gan_images, ``sampling`` -> clip_classes, ``features`` ->
    feature_classes) wins; else the first plug-in that claims it (task detection with a masks output ->
    instance_masks, other detection -> detection_boxes, segmentation -> semantic_labels). The exporter writes
    this as deploy.yaml's ``predictor``; exports written before that key existed are read with it.

    Raises:
        DeployError: no plug-in recognises the content.
    """
    _load_builtins()
    plugins = list(_PLUGINS.values())
    for plugin in [p for p in plugins if p.section is not None] + [p for p in plugins if p.section is None]:
        if plugin.claims(deploy):
            return plugin.name
    model = deploy.get("model") if isinstance(deploy.get("model"), dict) else {}
    raise DeployError(f"cannot tell which predictor runs this model (model.task {model.get('task')!r}, "
                      f"postprocess.type {(deploy.get('postprocess') or {}).get('type')!r}); add "
                      f"`{PREDICTOR_KEY}: NAME` to deploy.yaml, one of: {', '.join(_PLUGINS)}")


def predictor_name(deploy: dict) -> str:
    """deploy.yaml's ``predictor``, or :func:`predictor_kind` for an export written before the key existed."""
    name = deploy.get(PREDICTOR_KEY)
    return name if name is not None else predictor_kind(deploy)


def predictor_for(deploy: dict, path: str = "deploy.yaml") -> PredictorPlugin:
    """The plug-in of a deploy.yaml (its ``predictor`` key, else inferred); an unknown name is a
    :class:`DeployError` naming ``path`` and listing the known predictors."""
    name = predictor_name(deploy)
    if not isinstance(name, str) or name not in predictor_names():
        raise DeployError(f"{path}: unknown predictor {name!r}; known predictors: {', '.join(predictor_names())}")
    return _PLUGINS[name]


def add_flag(parser: argparse.ArgumentParser, *flags: str, **kwargs: Any) -> None:
    """``parser.add_argument(*flags, **kwargs)`` unless the flag is there already (two plug-ins sharing it)."""
    if any(f in parser._option_string_actions for f in flags):  # noqa: SLF001  (argparse has no public lookup)
        return
    parser.add_argument(*flags, **kwargs)


def add_all_arguments(parser: argparse.ArgumentParser) -> None:
    """Every registered plug-in's flags (the CLI parses before it reads deploy.yaml, so all are known; a flag
    that does not apply to the model is refused by its plug-in's :meth:`PredictorPlugin.run`)."""
    _load_builtins()
    for plugin in _PLUGINS.values():
        plugin.add_arguments(parser)
