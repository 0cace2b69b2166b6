"""Find a registry for a kind and scope the way mmengine does, list the names visible from it, and
suggest the closest names (and other scopes) for a misspelled ``type``.

Separate from the checks themselves so ``--list`` and the problem messages share one lookup.
"""

from __future__ import annotations

import difflib
from typing import Any

import mmengine.registry as mm_registry
from mmengine.registry import Registry

from oars.config.errors import ConfigError
from oars.tasks import TASKS, find_task, known_tasks


def _registry_constants() -> dict[str, Registry]:
    return {c: getattr(mm_registry, c) for c in dir(mm_registry)
            if c.isupper() and isinstance(getattr(mm_registry, c), Registry)}


def _scope_known(scope: str) -> bool:
    return any(root._search_child(scope) is not None for root in _registry_constants().values())


def _import_task_registries(scope: str) -> str:
    """Let the task of ``scope`` create its registries (``Task.import_registries``); why not, or ""."""
    task = find_task(scope)
    if task is None:
        return TASKS.broken().get(scope) or ("no registered task has this scope; `pip install -e .` registers the "
                                             "tasks of a checkout")
    try:
        task.import_registries()
    except Exception as err:  # noqa: BLE001 - reported to the user with its cause
        return f"importing the {scope} task's registries failed: {type(err).__name__}: {err}"
    return ""


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
                why = _import_task_registries(scope)
                if why and not _scope_known(scope):
                    raise ConfigError(f"default_scope {scope!r}: no registries for this scope ({why}); use the "
                                      f"name of a task (known tasks: {known_tasks()})")
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
            f"visible from {scope_text}; list them with `python -m oars.config.check --list "
            f"{registry.name.replace(' ', '_')}{' --scope ' + scope if scope else ''}`)")


def _ancestor_scopes(registry: Registry) -> set[str]:
    scopes = set()
    reg: Registry | None = registry
    while reg is not None:
        scopes.add(reg.scope)
        reg = reg.parent
    return scopes


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
