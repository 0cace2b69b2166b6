"""Check a loaded config before anything is built: every ``type`` must name a registered class, and
every key beside it must be an argument that class accepts.

Problems are reported the way a user fixes them: the file that set the key, the key path, what is
wrong, and the closest valid names. The registry a ``type`` belongs to follows from where the dict
sits (``model.**`` -> MODELS, ``*_dataloader.dataset`` -> DATASETS, ``*pipeline[i]`` -> TRANSFORMS, ...);
the registry's scope is the config's ``default_scope`` (or a ``_scope_`` key), as mmengine builds it.
Run ``python -m oars.config_check CONFIG [-o KEY=VALUE ...]`` to check a file, or
``python -m oars.config_check --list model --scope segmentation`` to list names.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import importlib
import inspect
import sys
import textwrap
from collections.abc import Iterator, Mapping
from typing import Any

import mmengine.registry as mm_registry
from mmengine.config import Config
from mmengine.registry import Registry

from oars.config import ConfigError, cfg_provenance, join_key, load_config, source_of

Path_ = tuple  # key path as a tuple of str keys and int list indices

# Keys that a builder pops before calling the class, so they are not constructor arguments.
_BUILDER_KEYS = {
    "HOOKS": {"priority"},
    "OPTIM_WRAPPERS": {"constructor", "paramwise_cfg"},
    "PARAM_SCHEDULERS": {"convert_to_iter_based"},
    "WEIGHT_INITIALIZERS": {"override"},
}
_ALWAYS_ALLOWED = {"type", "_scope_"}
# Layer specs inside models (``norm: {type: GN, num_groups: 16}``) name entries of a table in
# oars.models.layers, not registered classes.
_LAYER_KEYS = {"norm": "layer:norm", "norm_cfg": "layer:norm", "act": "layer:activation", "act_cfg": "layer:activation"}
_LAYER_TABLES = {
    "layer:norm": ("oars.models.layers.norm", "NORM_LAYERS"),
    "layer:activation": ("oars.models.layers.activation", "ACT_LAYERS"),
}
_DATASET_KEYS = {"dataset", "datasets"}
_TOP_LEVEL = {
    "visualizer": "VISUALIZERS",
    "log_processor": "LOG_PROCESSORS",
    "model_wrapper_cfg": "MODEL_WRAPPERS",
    "train_cfg": "LOOPS",
    "val_cfg": "LOOPS",
    "test_cfg": "LOOPS",
}


def _key_text(path: Path_) -> str:
    text = ""
    for part in path:
        text = join_key(text, part)
    return text


def _is_index(part: Any) -> bool:
    return isinstance(part, int) and not isinstance(part, bool)


def _is_pipeline_key(part: Any) -> bool:
    return isinstance(part, str) and (part == "pipeline" or part.endswith("_pipeline"))


def registry_kind(path: Path_, node: Mapping) -> str | None:
    """The mmengine registry constant (``"MODELS"``, ...) a typed dict at ``path`` is built from.

    ``"layer:norm"`` / ``"layer:activation"`` for layer specs inside a model (checked against tables).

    ``None`` where no registry is known, e.g. albumentations names nested inside an ``Albu``
    transform: the transform that owns them checks those itself.
    """
    if not path or not isinstance(path[0], str):
        return None
    top, rest = path[0], path[1:]
    if top in ("model", "tta_model"):
        if "init_cfg" in rest:
            return "WEIGHT_INITIALIZERS"
        return _LAYER_KEYS.get(rest[-1], "MODELS") if rest else "MODELS"
    for i, part in enumerate(path):
        if _is_pipeline_key(part):  # pipeline[i] is a transform; anything deeper belongs to it
            return "TRANSFORMS" if len(path) == i + 2 and _is_index(path[i + 1]) else None
    if top.endswith("_dataloader"):
        if rest and rest[0] == "dataset" and all(p in _DATASET_KEYS or _is_index(p) for p in rest):
            return "DATASETS"
        if rest in (("sampler",), ("batch_sampler",)):
            return "DATA_SAMPLERS"
        return "FUNCTIONS" if rest == ("collate_fn",) else None
    if top.endswith("_evaluator"):
        if not rest:
            return "EVALUATOR" if "metrics" in node else "METRICS"
        if (len(rest) == 1 and _is_index(rest[0])) or (rest[0] == "metrics" and len(rest) <= 2):
            return "METRICS"
        return None
    if top == "custom_hooks":
        return "HOOKS" if len(rest) == 1 and _is_index(rest[0]) else None
    if top == "default_hooks":
        return "HOOKS" if len(rest) == 1 else None
    if top == "optim_wrapper":  # a wrapper, or a dict of wrappers (GANs); each has an optimizer
        if rest and rest[-1] == "optimizer" and len(rest) <= 2:
            return "OPTIMIZERS"
        return "OPTIM_WRAPPERS" if len(rest) <= 1 else None
    if top == "param_scheduler":
        return "PARAM_SCHEDULERS" if not rest or (len(rest) == 1 and _is_index(rest[0])) else None
    if top == "visualizer" and len(rest) == 2 and rest[0] == "vis_backends" and _is_index(rest[1]):
        return "VISBACKENDS"
    return _TOP_LEVEL.get(top) if not rest else None


def _typed_nodes(value: Any, path: Path_, scope: str | None) -> Iterator[tuple[Path_, dict, str | None]]:
    """Every dict with a ``type`` key, with its path and the scope it is built in."""
    if isinstance(value, Mapping):
        scope = value.get("_scope_", scope) if isinstance(value.get("_scope_"), str) else scope
        if "type" in value:
            yield path, value, scope
        for key, item in value.items():
            yield from _typed_nodes(item, (*path, key), scope)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _typed_nodes(item, (*path, i), scope)


def _registry_constants() -> dict[str, Registry]:
    return {c: getattr(mm_registry, c) for c in dir(mm_registry)
            if c.isupper() and isinstance(getattr(mm_registry, c), Registry)}


def _scope_known(scope: str) -> bool:
    return any(root._search_child(scope) is not None for root in _registry_constants().values())


class _Registries:
    """Finds the registry of a kind for a scope, as mmengine's ``switch_scope_and_registry`` does."""

    def __init__(self) -> None:
        import mmengine.runner  # noqa: F401 - registers mmengine's own hooks, optimizers, loops, ...

        self._cache: dict[tuple[str, str | None], Registry] = {}
        self._import_failed: dict[int, str] = {}

    def get(self, kind: str, scope: str | None) -> Registry:
        if (kind, scope) not in self._cache:
            root: Registry = getattr(mm_registry, kind)
            found = root if scope is None else root._search_child(scope)
            if found is None:
                try:
                    importlib.import_module(f"{scope}.registry")
                except Exception as err:  # noqa: BLE001 - reported to the user with its cause
                    if not _scope_known(scope):
                        raise ConfigError(
                            f"default_scope {scope!r}: no registries for this scope (importing '{scope}.registry' "
                            f"failed: {type(err).__name__}: {err}); use the name of a task package, e.g. "
                            "segmentation or detection") from None
                # mmengine falls back to the root registry when a scope has no child of this kind
                found = root._search_child(scope)
                if found is None:  # (not `or`: an empty Registry is falsy)
                    found = root
            self._cache[(kind, scope)] = found
        return self._cache[(kind, scope)]

    def import_error(self, registry: Registry) -> str | None:
        """Import the registry's ``locations`` once; the error text if that fails."""
        if id(registry) not in self._import_failed:
            try:
                registry.import_from_location()
                self._import_failed[id(registry)] = ""
            except Exception as err:  # noqa: BLE001 - reported to the user with its cause
                self._import_failed[id(registry)] = (
                    f"importing {', '.join(registry._locations)} (the modules that register "
                    f"{registry.scope}'s {registry.name} classes) failed: {type(err).__name__}: {err}")
        return self._import_failed[id(registry)] or None


def visible_names(registry: Registry) -> list[str]:
    """Names ``registry.get`` can find without a scope prefix: its own and its ancestors'."""
    names: list[str] = []
    reg: Registry | None = registry
    while reg is not None:
        names.extend(n for n in reg.module_dict if n not in names)
        reg = reg.parent
    return names


def _other_scopes(registry: Registry, name: str) -> list[str]:
    """Scopes (outside ``registry``'s view) where ``name`` is registered."""
    found = []
    stack = [registry.root]
    while stack:
        reg = stack.pop()
        if name in reg.module_dict:
            found.append(reg.scope)
        stack.extend(reg.children.values())
    return sorted(found)


def closest(name: str, candidates: list[str], n: int = 3) -> list[str]:
    """Closest candidates to ``name``, ignoring case."""
    by_lower: dict[str, list[str]] = {}
    for cand in candidates:
        by_lower.setdefault(cand.lower(), []).append(cand)
    matches = difflib.get_close_matches(name.lower(), list(by_lower), n=n, cutoff=0.6)
    if matches:  # keep the near-ties of the best match, not everything sharing a long prefix
        best = difflib.SequenceMatcher(None, name.lower(), matches[0]).ratio()
        matches = [m for m in matches if difflib.SequenceMatcher(None, name.lower(), m).ratio() >= best - 0.12]
    return [orig for m in matches for orig in by_lower[m]][:n]


def _lookup(registry: Registry, name: str) -> Any:
    try:
        return registry.get(name)
    except Exception:  # noqa: BLE001 - mmengine raises RuntimeError('Failed to get X') for unknown names
        return None


def _unknown_type(where: str, key: str, name: str, registry: Registry, scope: str | None) -> str:
    real = Registry.split_scope_key(name)[1]
    names = visible_names(registry)
    near = closest(real, names)
    hint = f" Did you mean: {', '.join(near)}?" if near else ""
    elsewhere = [s for s in _other_scopes(registry, real) if s not in _ancestor_scopes(registry)]
    if elsewhere:
        hint += (f" '{real}' is registered in scope {', '.join(elsewhere)}: add `_scope_: {elsewhere[0]}` to "
                 "this dict (or change default_scope).")
    scope_text = f"scope '{registry.scope}'" if scope else "mmengine's root scope (no default_scope is set)"
    if scope and registry.scope != scope:
        scope_text += f", as scope '{scope}' has no {registry.name} registry"
    return (f"{where}: {key}: unknown {registry.name} type {name!r}.{hint} (registered: {len(names)} names "
            f"visible from {scope_text}; list them with `python -m oars.config_check --list "
            f"{registry.name.replace(' ', '_')}{' --scope ' + scope if scope else ''}`)")


def _ancestor_scopes(registry: Registry) -> set[str]:
    scopes = set()
    reg: Registry | None = registry
    while reg is not None:
        scopes.add(reg.scope)
        reg = reg.parent
    return scopes


_KEYWORD_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def _param_names(fn: Any, drop_first: bool) -> tuple[list[str], str | None]:
    """Keyword-passable parameter names of ``fn`` and the name of its ``**kwargs`` (or None)."""
    params = list(inspect.signature(fn).parameters.values())
    if drop_first and params:
        params = params[1:]
    var_kw = next((p.name for p in params if p.kind is inspect.Parameter.VAR_KEYWORD), None)
    return [p.name for p in params if p.kind in _KEYWORD_KINDS], var_kw


def _is_super_init(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "__init__" and isinstance(func.value, ast.Call)
            and isinstance(func.value.func, ast.Name) and func.value.func.id == "super")


def _forwards_only_to_super(init: Any, var_kw: str) -> bool:
    """True when ``**var_kw`` is used only as ``super().__init__(..., **var_kw)`` (the mmseg head pattern)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
    except (OSError, TypeError, SyntaxError):
        return False
    func = tree.body[0] if tree.body else None
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    nodes = [n for stmt in func.body for n in ast.walk(stmt)]
    uses = sum(isinstance(n, ast.Name) and n.id == var_kw for n in nodes)
    forwarded = sum(k.arg is None and isinstance(k.value, ast.Name) and k.value.id == var_kw
                    for n in nodes if isinstance(n, ast.Call) and _is_super_init(n.func) for k in n.keywords)
    return forwarded > 0 and forwarded == uses


def _rejects_unknown_kwargs(klass: type) -> bool:
    """``object`` and ``torch.nn.Module`` take ``**kwargs`` in their signature but reject any given."""
    return klass is object or (klass.__module__ == "torch.nn.modules.module" and klass.__name__ == "Module")


def accepted_arguments(obj: Any) -> list[str] | None:
    """The keyword arguments ``obj(**cfg)`` accepts; ``None`` when it takes any or cannot be inspected.

    A class whose ``**kwargs`` only go to ``super().__init__`` accepts its own arguments plus those of
    the next ``__init__`` in its MRO, so a typo in a head's base-class argument is still caught.
    """
    try:
        names, var_kw = _param_names(obj, drop_first=False)
    except (TypeError, ValueError):
        return None
    if var_kw is None:
        return names
    if not inspect.isclass(obj):
        return None
    accepted: list[str] = []
    for klass in obj.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        if _rejects_unknown_kwargs(klass):
            return accepted
        try:
            names, var_kw = _param_names(init, drop_first=True)
        except (TypeError, ValueError):
            return None
        accepted.extend(n for n in names if n not in accepted)
        if var_kw is None:
            return accepted
        if not _forwards_only_to_super(init, var_kw):
            return None
    return None


def _unknown_args(obj: Any, node: Mapping, path: Path_, kind: str, describe) -> list[str]:
    """Keys of ``node`` the constructor of ``obj`` does not accept (none if it takes any ``**kwargs``)."""
    accepted = accepted_arguments(obj)
    if accepted is None:
        return []
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


def config_problems(cfg: Config | Mapping) -> list[str]:
    """Every unknown ``type`` and unknown constructor argument in ``cfg``, as messages."""
    data = cfg.to_dict() if isinstance(cfg, Config) else cfg
    provenance = cfg_provenance(cfg) if isinstance(cfg, Config) else {}
    filename = (cfg.filename if isinstance(cfg, Config) else None) or "<config>"

    def describe(path: Path_) -> tuple[str, str]:
        key = _key_text(path)
        source = source_of(provenance, key)
        if source is None and provenance:  # loaded from files, but this key was set by code afterwards
            source = f"{filename} (key added after loading, in no file)"
        return source or filename, key

    default_scope = data.get("default_scope")
    if default_scope is not None and not isinstance(default_scope, str):
        return [f"{describe(('default_scope',))[0]}: default_scope: expected a scope name such as "
                f"'segmentation', got {default_scope!r}"]
    registries = _Registries()
    problems: list[str] = []
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


def _list_names(kind: str, scope: str | None) -> list[str]:
    consts = {reg.name.replace(" ", "_"): c for c, reg in _registry_constants().items()}
    if kind not in consts:
        raise ConfigError(f"--list {kind!r}: unknown registry; choose from {', '.join(sorted(consts))}")
    registries = _Registries()
    registry = registries.get(consts[kind], scope)
    failure = registries.import_error(registry)
    if failure:
        raise ConfigError(failure)
    return sorted(visible_names(registry))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Check a YAML config, or list registered names.")
    parser.add_argument("config", nargs="?", help="YAML config to check")
    parser.add_argument("-o", dest="overrides", nargs="+", action="extend", default=[], metavar="KEY=VALUE")
    parser.add_argument("--list", metavar="REGISTRY", help="print the names of a registry (e.g. model)")
    parser.add_argument("--scope", default=None, help="scope for --list (e.g. segmentation)")
    args = parser.parse_args(argv)
    try:
        if args.list:
            print("\n".join(_list_names(args.list, args.scope)))
            return 0
        if not args.config:
            parser.error("give a config file or --list REGISTRY")
        check_config(load_config(args.config, args.overrides))
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"{args.config}: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
