"""Make an installed package look missing for one test, as on a machine without its extra.

``sys.modules[name] = None`` makes ``import name`` raise ImportError (and ``importlib.util.find_spec`` refuse it),
but a submodule imported earlier in the session (``ray.serve``) would still import from the cache: every cached
submodule is hidden too. Modules of ours that import the package can be dropped from the cache so that the test
imports them afresh (an import at their top then fails as it would for the user); monkeypatch puts everything back,
the parents' attributes included, when the test ends.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest


def _module_names(prefix: str) -> list[str]:
    """``prefix`` and, for a package, every module below it, imported or not (read from its folder)."""
    spec = importlib.util.find_spec(prefix)
    names = [prefix]
    for folder in (spec.submodule_search_locations or []) if spec else []:
        for base, _, files in os.walk(folder):
            rel = os.path.relpath(base, folder)
            dotted = prefix if rel == "." else ".".join([prefix, *rel.split(os.sep)])
            names += [f"{dotted}.{f[:-3]}" if f != "__init__.py" else dotted for f in files if f.endswith(".py")]
    return sorted(set(names))


def hide_packages(monkeypatch: pytest.MonkeyPatch, *packages: str, reimport: tuple[str, ...] = ()) -> None:
    """Hide ``packages`` (and their cached submodules) and drop the modules under ``reimport`` from the cache.

    Args:
        monkeypatch: the test's monkeypatch: at the end, the cache holds again what it held (the modules the test
            imported afresh are removed) and the parents' attributes are restored.
        packages: top-level packages to hide (``"ray"``).
        reimport: dotted names of our modules or packages to import afresh (``"oars_deploy.serve"``).
    """
    names = [n for prefix in reimport for n in _module_names(prefix)]
    for name in names:
        parent, _, child = name.rpartition(".")
        if parent in sys.modules and parent not in names:  # the import of the fresh module rebinds this attribute
            monkeypatch.setattr(sys.modules[parent], child, getattr(sys.modules[parent], child, None), raising=False)
        monkeypatch.setitem(sys.modules, name, None)  # remembers what was cached, or that nothing was
        del sys.modules[name]
    for name in list(sys.modules):
        if any(name == p or name.startswith(p + ".") for p in packages):
            monkeypatch.setitem(sys.modules, name, None)
    for p in packages:
        monkeypatch.setitem(sys.modules, p, None)
