"""Check a loaded config before anything is built: every ``type`` must name a registered class, every
key beside it must be an argument that class accepts, every built section must have the right shape and
a ``type`` (``structure``), and the values every run reads must be usable (``values``).

Problems are reported the way a user fixes them: the file that set the key, the key path, what is
wrong, and the closest valid names. The registry a ``type`` belongs to follows from where the dict
sits (``model.**`` -> MODELS, ``*_dataloader.dataset`` -> DATASETS, ``*pipeline[i]`` -> TRANSFORMS, ...);
the registry's scope is the config's ``default_scope`` (or a ``_scope_`` key), as mmengine builds it.
Run ``python -m oars.config.check CONFIG [-o KEY=VALUE ...]`` to check a file (names, then the model is built to
validate values such as ``backbone.depth: 19``; ``--no-build`` skips that), or
``python -m oars.config.check --list model --scope segmentation`` to list names.

The helpers live in ``registry_map`` (key path -> registry), ``registry_lookup``
(registries, visible names, suggestions) and ``arguments`` (accepted constructor arguments).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mmengine.config import Config

from oars.config.arguments import accepted_arguments
from oars.config.build_check import build_model_problem
from oars.config.data_description import DESCRIPTION_KEY, apply_data_description
from oars.config.errors import ConfigError
from oars.config.load import load_config
from oars.config.mmengine_config import cfg_provenance
from oars.config.provenance import source_of
from oars.config.registry_lookup import _list_names, _lookup, _Registries, _unknown_type, closest
from oars.config.registry_lookup import visible_names as visible_names  # re-exported: public API
from oars.config.registry_map import _LAYER_TABLES, Path_, _key_text, _typed_nodes, registry_kind
from oars.config.sections import section_problems
from oars.config.structure import structure_problems
from oars.config.values import value_problems
from oars.tasks import known_tasks

# Keys that a builder pops before calling the class, so they are not constructor arguments.
_BUILDER_KEYS = {
    "HOOKS": {"priority"},
    "OPTIM_WRAPPERS": {"constructor", "paramwise_cfg"},
    "PARAM_SCHEDULERS": {"convert_to_iter_based"},
    "WEIGHT_INITIALIZERS": {"override"},
}
# Arguments the builder passes itself (mmengine's Runner gives a loop its runner, loader and evaluator).
_SUPPLIED_BY_BUILDER = {"LOOPS": ("runner", "dataloader", "evaluator")}
_ALWAYS_ALLOWED = {"type", "_scope_"}


def _unknown_args(obj: Any, node: Mapping, path: Path_, kind: str, describe) -> list[str]:
    """Keys of ``node`` the constructor of ``obj`` does not accept (none if it takes any ``**kwargs``)."""
    accepted = accepted_arguments(obj)
    if accepted is None:
        return []
    accepted = [a for a in accepted if a not in _SUPPLIED_BY_BUILDER.get(kind, ())]
    skip = _ALWAYS_ALLOWED | _BUILDER_KEYS.get(kind, set())
    problems = []
    cls_name = getattr(obj, "__name__", repr(obj))
    for arg in node:
        if arg in skip or arg in accepted:
            continue
        where, key = describe((*path, arg))
        near = closest(str(arg), accepted)
        hint = f" Did you mean: {', '.join(near)}?" if near else ""
        problems.append(f"{where}: {key}: {cls_name} has no argument {arg!r}.{hint} "
                        f"Accepted: {', '.join(accepted) or '(none)'}")
    return problems


def _layer_problems(kind: str, node: Mapping, path: Path_, describe) -> list[str]:
    """``norm: {type: GN, ...}`` / ``act: {type: ReLU}`` name layers in a table, not a registry."""
    module, attr = _LAYER_TABLES[kind]
    try:
        table = getattr(importlib.import_module(module), attr)
    except Exception:  # noqa: BLE001 - no table to check against; building the model reports it
        return []
    name = node["type"]
    if name in table:
        return _unknown_args(table[name], node, path, kind, describe)
    where, key = describe((*path, "type"))
    near = closest(name, list(table))
    hint = f" Did you mean: {', '.join(near)}?" if near else ""
    return [f"{where}: {key}: unknown {kind.split(':')[1]} type {name!r}.{hint} Accepted: {', '.join(table)}"]


def _runner_arguments() -> set[str]:
    from mmengine.runner import Runner

    return {n for n in inspect.signature(Runner.__init__).parameters if n not in ("self", "cfg")}


# What a config may hold at its top level: the Runner's arguments plus the keys the engine and
# tools read themselves. Anything else is a typo that would otherwise be ignored silently.
TOP_LEVEL_KEYS = frozenset(_runner_arguments() | {
    "export", "compress", "sync_bn", "model_wrapper_cfg", "find_unused_parameters", "dist_params", "gpu_ids",
    "compile",  # torch.compile when training starts (OarsRunner._maybe_compile), checked in oars.engine.compile
    "channels_last",  # channels-last weights when training starts, checked in oars.engine.memory_format
    "loggers",  # experiment trackers (tools/train.py --logger), resolved in oars.engine.tracking
    DESCRIPTION_KEY,  # the --data file a run's datasets came from (oars.config.data_description)
})


def describer(cfg: Config | Mapping) -> Callable[[Path_], tuple[str, str]]:
    """Key path -> (the file that set it, the key text) for ``cfg``: how every message names where a key is."""
    provenance = cfg_provenance(cfg) if isinstance(cfg, Config) else {}
    filename = (cfg.filename if isinstance(cfg, Config) else None) or "<config>"

    def describe(path: Path_) -> tuple[str, str]:
        key = _key_text(path)
        source = source_of(provenance, key)
        if source is None and provenance:  # loaded from files, but this key was set by code afterwards
            source = f"{filename} (key added after loading, in no file)"
        return source or filename, key

    return describe


def config_problems(cfg: Config | Mapping) -> list[str]:
    """Every unknown ``type`` and unknown constructor argument in ``cfg``, as messages."""
    data = cfg.to_dict() if isinstance(cfg, Config) else cfg
    describe = describer(cfg)
    default_scope = data.get("default_scope")
    if default_scope is not None and not isinstance(default_scope, str):
        return [f"{describe(('default_scope',))[0]}: default_scope: expected the name of a task (known tasks: "
                f"{known_tasks()}), got {default_scope!r}"]
    registries = _Registries()
    problems: list[str] = []
    for key in data:
        if key not in TOP_LEVEL_KEYS:
            where, _ = describe((key,))
            near = closest(key, sorted(TOP_LEVEL_KEYS))
            hint = f" Did you mean: {', '.join(near)}?" if near else ""
            problems.append(f"{where}: {key}: unknown top-level key.{hint}")

    def names_for(kind: str, scope: str | None) -> tuple[dict[str, Any], str]:
        try:
            registry = registries.get(kind, scope)
        except ConfigError:  # an unknown default_scope is reported on its own
            return {}, kind.lower()
        registries.import_error(registry)
        names = {name: _lookup(registry, name) for name in sorted(visible_names(registry))}
        return names, registry.name.replace(" ", "_")

    problems += structure_problems(data, describe, names_for)
    problems += value_problems(data, describe)
    problems += section_problems(data, describe)
    for path, node, scope in _typed_nodes(data, (), default_scope):
        kind = registry_kind(path, node)
        if kind is None:
            continue
        where, key = describe((*path, "type"))
        name = node["type"]
        if not isinstance(name, str) or not name:
            problems.append(f"{where}: {key}: expected a class name (a string), got {name!r}")
            continue
        if kind in _LAYER_TABLES:
            problems.extend(_layer_problems(kind, node, path, describe))
            continue
        try:
            registry = registries.get(kind, scope)
        except ConfigError as err:
            problems.append(f"{describe(('default_scope',))[0]}: {err}")
            continue
        failure = registries.import_error(registry)
        if failure:
            problems.append(f"{where}: {key}: cannot look up {name!r}: {failure}")
            continue
        obj = _lookup(registry, name)
        if obj is None:
            problems.append(_unknown_type(where, key, name, registry, scope))
        else:
            problems.extend(_unknown_args(obj, node, path, kind, describe))
    return list(dict.fromkeys(problems))


def check_config(cfg: Config | Mapping) -> None:
    """Raise ``ConfigError`` listing every unknown ``type`` and unknown argument in ``cfg``."""
    problems = config_problems(cfg)
    if len(problems) == 1:
        raise ConfigError(problems[0])
    if problems:
        raise ConfigError(f"{len(problems)} problems in the config:\n" + "\n".join(f"- {p}" for p in problems))


def load_checked_config(config: str, overrides: Sequence[str] = (), *, check: bool = True, data: str | None = None,
                        data_splits: Sequence[str] | None = None) -> Config:
    """Load ``config`` with its ``-o`` overrides and check it (:func:`check_config`) before anything is built: the
    one function every tool loads its config through.

    Why: every tool that builds from a config (tools/get_flops.py, export.py, infer.py, compress.py, ...) must
    name a misspelt ``type`` or argument the way tools/train.py does (file, key path, closest names), not end in
    mmengine's ``KeyError`` from the registry.

    Args:
        config: the YAML file.
        overrides: ``key=value`` strings (``-o``).
        check: False only for a run that validates the config itself once it is complete (a training or
            evaluation run, ``oars.engine.run_setup``: the same check plus its datasets, after the flags changed
            the config), so that the check runs once.
        data: a dataset description file (``--data``): every loader's dataset and the model's ``num_classes`` set
            from it after the overrides (:func:`oars.config.data_description.apply_data_description`).
        data_splits: the splits the run reads (``train``, ``val``, ``test``); None: every loader of the config.

    Returns:
        The loaded config.

    Raises:
        ConfigError: the file cannot be loaded, or :func:`check_config` found problems (all of them listed).
    """
    cfg = load_config(config, list(overrides))
    if data is not None:
        apply_data_description(cfg, data, data_splits)
    if check:
        check_config(cfg)
    return cfg


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Check a YAML config, or list registered names.")
    parser.add_argument("config", nargs="?", help="YAML config to check")
    parser.add_argument("-o", dest="overrides", nargs="+", action="extend", default=[], metavar="KEY=VALUE")
    parser.add_argument("--list", metavar="REGISTRY", help="print the names of a registry (e.g. model)")
    parser.add_argument("--scope", default=None, help="scope for --list (a config's default_scope)")
    parser.add_argument("--no-build", action="store_true",
                        help="check names only; by default the model is built too, which validates values the "
                             "names cannot (backbone.depth: 19)")
    args = parser.parse_args(argv)
    try:
        if args.list:
            print("\n".join(_list_names(args.list, args.scope)))
            return 0
        if not args.config:
            parser.error("give a config file or --list REGISTRY")
        cfg = load_checked_config(args.config, args.overrides)
        problem, params = (None, 0) if args.no_build else build_model_problem(cfg, describer(cfg))
        if problem:
            raise ConfigError(problem)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    built = "" if args.no_build or not params else f" (model built: {params:,} parameters)"
    print(f"{args.config}: OK{built}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
