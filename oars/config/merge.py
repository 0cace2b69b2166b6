"""Merge rules and ``_base_`` inheritance: how a config file and the files it inherits combine.

Dicts merge deeply, anything else (lists too) replaces, and ``_delete_: true`` makes a dict replace
the inherited one. ``_base_`` chains may be of any depth (MMDetection users layer configs freely: a CPU variant on
a recipe on a model preset on a model); a cycle is refused naming the chain (``a.yaml -> b.yaml -> a.yaml``), and
every key keeps the file that set it last, so a deep chain still says where a value came from. ``-o`` overrides
reuse ``_merge``.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Mapping
from typing import Any

from oars.config.errors import ConfigError
from oars.config.provenance import Provenance, _forget, _record, _Source, join_key, source_of
from oars.config.yaml_io import YAML_SUFFIXES, _read_yaml

BASE_KEY = "_base_"
DELETE_KEY = "_delete_"


# ----------------------------------------------------------------------------- merging


def _pop_delete(value: dict, path: str, source: _Source) -> tuple[dict, bool]:
    if DELETE_KEY not in value:
        return value, False
    value = dict(value)
    flag = value.pop(DELETE_KEY)
    if not isinstance(flag, bool):
        raise ConfigError(f"{source(path)}: {join_key(path, DELETE_KEY)}: expected true or false, got {flag!r}")
    return value, flag


def _strip_delete(value: Any, path: str, source: _Source) -> Any:
    """A deep copy of ``value`` without ``_delete_`` keys (meaningless when nothing is inherited)."""
    if isinstance(value, dict):
        value, _ = _pop_delete(value, path, source)
        return {k: _strip_delete(v, join_key(path, k), source) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strip_delete(v, join_key(path, i), source) for i, v in enumerate(value)]
    return copy.deepcopy(value)


def _merge(dst: dict, src: Mapping, prefix: str, provenance: Provenance, source: _Source) -> None:
    """Deep-merge ``src`` into ``dst``: dicts merge, anything else (lists too) replaces.

    A dict with ``_delete_: true`` replaces the inherited dict instead of merging into it.
    """
    for key, value in src.items():
        path = join_key(prefix, key)
        if isinstance(value, dict):
            value, delete = _pop_delete(value, path, source)
            if not delete and isinstance(dst.get(key), dict):
                _merge(dst[key], value, path, provenance, source)
                continue
        _forget(provenance, path)
        dst[key] = _strip_delete(value, path, source)
        _record(provenance, path, dst[key], source)


# ----------------------------------------------------------------------------- _base_ resolution


def _base_refs(value: Any, path: str) -> list[str]:
    refs = [value] if isinstance(value, str) else value
    if not isinstance(refs, list) or not all(isinstance(r, str) and r for r in refs):
        raise ConfigError(f"{path}: {BASE_KEY} must be a file path or a list of file paths "
                          f"(relative to this file), got {value!r}")
    return refs


def _chain_text(chain: Iterable[str]) -> str:
    return " -> ".join(chain)


def _load_tree(path: str, ancestors: tuple[tuple[str, str], ...]) -> tuple[dict, Provenance]:
    """Load ``path`` with its bases merged below it. ``ancestors``: (shown path, real path) pairs."""
    data = _read_yaml(path)
    real = os.path.realpath(path)
    chain = (*ancestors, (path, real))
    merged: dict = {}
    provenance: Provenance = {}
    for ref in _base_refs(data.pop(BASE_KEY), path) if BASE_KEY in data else []:
        base = os.path.normpath(os.path.join(os.path.dirname(path), os.path.expanduser(ref)))
        names = [shown for shown, _ in chain] + [base]
        if os.path.realpath(base) in {r for _, r in chain}:
            raise ConfigError(f"{path}: {BASE_KEY} makes a cycle: {_chain_text(names)}")
        if not os.path.isfile(base):
            raise ConfigError(f"{path}: {BASE_KEY} file {ref!r} not found (looked for {base}); "
                              "base paths are relative to the file that names them")
        if not base.endswith(YAML_SUFFIXES):
            raise ConfigError(f"{path}: {BASE_KEY} file {ref!r} is not YAML (.yaml/.yml)")
        base_data, base_prov = _load_tree(base, chain)
        _merge(merged, base_data, "", provenance,
               lambda key, bp=base_prov, b=base: source_of(bp, key) or b)
    _merge(merged, data, "", provenance, lambda key: path)
    return merged, provenance
