"""YAML configs: load with ``_base_`` inheritance, apply ``-o`` overrides, remember where keys came from.

Configs are plain YAML (no tags, no Python), so a resolved config can be written next to every
checkpoint and loaded again. Inheritance is kept shallow (at most two levels of ``_base_`` below the
top file) because deep chains are where users get lost. Every leaf key remembers the file that set
it last (or ``-o``), so later errors can point at the right file.
"""

from __future__ import annotations

import copy
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from mmengine.config import Config

from oars.errors import OarsError

MAX_BASE_DEPTH = 2  # levels of ``_base_`` allowed below the top file
OVERRIDE_SOURCE = "-o"
YAML_SUFFIXES = (".yaml", ".yml")
BASE_KEY = "_base_"
DELETE_KEY = "_delete_"
_PROVENANCE_ATTR = "_oars_provenance"  # lives in Config.__dict__, outside _cfg_dict, so dumps never see it
_RESERVED_TOP_KEYS = ("filename", "text", "pretty_text", "env_variables")  # mmengine's Config reserves these

Provenance = dict[str, str]
_Source = Callable[[str], str]


class ConfigError(OarsError):
    """A config problem; the message names the file, the key and what to fix."""


# ----------------------------------------------------------------------------- key paths


def join_key(prefix: str, key: Any) -> str:
    """``model`` + ``backbone`` -> ``model.backbone``; ``pipeline`` + 2 -> ``pipeline[2]``."""
    if isinstance(key, int) and not isinstance(key, bool):
        return f"{prefix}[{key}]"
    return f"{prefix}.{key}" if prefix else str(key)


def _parent_key(path: str) -> str:
    cut = max(path.rfind("."), path.rfind("["))
    return path[:cut] if cut > 0 else ""


def source_of(provenance: Mapping[str, str], path: str) -> str | None:
    """The file that set ``path``: for a mapping, the files that set its leaves (comma-separated);
    for an item inside a list, the file that set the list."""
    if path and path not in provenance:
        below = [src for key, src in provenance.items() if key.startswith((path + ".", path + "["))]
        if below:
            return ", ".join(dict.fromkeys(below))
    while path:
        if path in provenance:
            return provenance[path]
        path = _parent_key(path)
    return None


def _forget(provenance: Provenance, path: str) -> None:
    """Drop ``path`` and everything below it (it is about to be replaced)."""
    for key in [k for k in provenance if k == path or k.startswith((path + ".", path + "["))]:
        del provenance[key]


def _record(provenance: Provenance, path: str, value: Any, source: _Source) -> None:
    """Record the source of every leaf of ``value`` placed at ``path`` (lists are leaves)."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _record(provenance, join_key(path, key), item, source)
    else:
        provenance[path] = source(path)


# ----------------------------------------------------------------------------- YAML reading


class _StrictSafeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that also rejects a key written twice in one mapping (YAML keeps the last)."""

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"duplicate key {key!r} (first defined on line {seen[key].line + 1})", key_node.start_mark)
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


# YAML 1.1 (PyYAML) reads ``1e-4`` as a string because it has no dot; configs mean a float (YAML 1.2 does).
_StrictSafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _yaml_error(path: str, text: str, err: yaml.YAMLError) -> ConfigError:
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    problem = getattr(err, "problem", None) or str(err)
    context = getattr(err, "context", None)
    if mark is None:
        return ConfigError(f"{path}: invalid YAML: {problem}")
    where = f"{path}:{mark.line + 1}:{mark.column + 1}"
    lines = text.splitlines()
    shown = ""
    if 0 <= mark.line < len(lines):
        shown = f"\n    {lines[mark.line]}\n    {' ' * mark.column}^"
    hint = ""
    if "constructor for the tag" in problem:
        hint = "\n  configs must be plain YAML: no custom tags such as !!python/tuple; write a list instead"
    if isinstance(err, yaml.constructor.ConstructorError):  # well-formed YAML, but not plain config data
        label, ctx = "invalid YAML", ""
    else:
        label, ctx = "YAML syntax error", (f" ({context})" if context and context not in problem else "")
    return ConfigError(f"{where}: {label}: {problem}{ctx} (line {mark.line + 1}, column "
                       f"{mark.column + 1}){shown}{hint}")


def _read_yaml(path: str) -> dict:
    """Parse one file into a mapping, with errors that give file, line and column."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as err:
        raise ConfigError(f"{path}: cannot read config file: {err.strerror or err}") from None
    try:
        data = yaml.load(text, Loader=_StrictSafeLoader)  # a SafeLoader subclass: plain data only
    except yaml.YAMLError as err:
        raise _yaml_error(path, text, err) from None
    if data is None:
        raise ConfigError(f"{path}: the file is empty; a config must be a mapping of keys (e.g. 'model: ...')")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys, but it is a "
                          f"{type(data).__name__}; write 'key: value' lines")
    return data


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
        if len(chain) > MAX_BASE_DEPTH:
            raise ConfigError(
                f"{path}: {BASE_KEY} chain is deeper than {MAX_BASE_DEPTH} levels: {_chain_text(names)}. "
                f"A config may inherit at most {MAX_BASE_DEPTH} levels below the top file; "
                "copy the needed keys into a shallower base instead of chaining further")
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


# ----------------------------------------------------------------------------- plain data


def _to_plain(value: Any, path: str = "") -> Any:
    """Builtin YAML-safe data: mappings -> dict, tuples -> list, numpy scalars -> Python scalars."""
    if isinstance(value, Mapping):
        return {k: _to_plain(v, join_key(path, k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_plain(v, join_key(path, i)) for i, v in enumerate(value)]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    item = getattr(value, "item", None)
    if type(value).__module__ == "numpy" and callable(item):
        return item()
    raise ConfigError(f"{path or '<config>'}: a {type(value).__name__} value ({value!r}) cannot be written "
                      "to a plain YAML config; use numbers, strings, lists and mappings")


def _as_dict(cfg: Config | Mapping) -> dict:
    return cfg.to_dict() if isinstance(cfg, Config) else dict(cfg)


# ----------------------------------------------------------------------------- public API


def cfg_provenance(cfg: Config) -> Provenance:
    """Leaf key path -> file that set it last (``-o`` for command-line overrides). Live mapping."""
    prov = vars(cfg).get(_PROVENANCE_ATTR) if isinstance(cfg, Config) else None
    if prov is None:
        prov = {}
        if isinstance(cfg, Config):
            object.__setattr__(cfg, _PROVENANCE_ATTR, prov)
    return prov


def make_config(cfg_dict: Mapping, filename: str | os.PathLike | None = None,
                provenance: Provenance | None = None) -> Config:
    """An mmengine ``Config`` holding plain data, with ``provenance`` attached (not part of dumps)."""
    data = _to_plain(cfg_dict)
    for key in _RESERVED_TOP_KEYS:
        if key in data:
            where = source_of(provenance or {}, key) or filename or "<config>"
            raise ConfigError(f"{where}: top-level key {key!r} is reserved by mmengine's Config; rename it")
    cfg = Config(data, filename=None if filename is None else str(filename))
    object.__setattr__(cfg, _PROVENANCE_ATTR, dict(provenance or {}))
    return cfg


def load_config(path: str | os.PathLike, overrides: list[str] | None = None) -> Config:
    """Load a YAML config: merge its ``_base_`` files, apply ``-o`` overrides, return a ``Config``.

    Bases merge in the order listed, then the file itself on top: dicts merge deeply, lists and
    scalars replace, and ``_delete_: true`` makes a dict replace the inherited one.
    """
    path = str(path)
    if not path.endswith(YAML_SUFFIXES):
        raise ConfigError(f"{path}: only YAML configs (.yaml or .yml) are supported")
    if not os.path.isfile(path):
        raise ConfigError(f"{path}: config file not found")
    data, provenance = _load_tree(path, ())
    if overrides:
        apply_overrides(data, overrides, provenance)
    return make_config(data, path, provenance)


def _parse_override(item: str) -> tuple[list[str], Any]:
    form = "expected KEY=VALUE, e.g. -o optim_wrapper.optimizer.lr=0.02 or -o model.backbone.depth=18"
    if not isinstance(item, str) or "=" not in item:
        raise ConfigError(f"-o {item!r}: {form}")
    key, raw = item.split("=", 1)
    parts = key.strip().split(".")
    if not all(parts):
        raise ConfigError(f"-o {item!r}: the key {key!r} has an empty part; {form}")
    try:
        value = yaml.load(raw, Loader=_StrictSafeLoader)  # a SafeLoader subclass: plain data only
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or str(err)
        raise ConfigError(f"-o {item!r}: the value {raw!r} is not valid YAML ({problem}); "
                          "quote strings with special characters, write lists as [a, b]") from None
    return parts, value


def _set_override(data: dict, parts: list[str], value: Any, item: str, provenance: Provenance) -> None:
    def source(_: str) -> str:
        return OVERRIDE_SOURCE

    key = ".".join(parts)
    cur: Any = data
    path = ""
    for depth, part in enumerate(parts):
        if isinstance(cur, list):
            if not part.isdigit():
                raise ConfigError(f"-o {item!r}: {path} is a list (length {len(cur)}); "
                                  f"'{part}' must be an index from 0 to {len(cur) - 1}")
            child: Any = int(part)
            if child >= len(cur):
                raise ConfigError(f"-o {item!r}: index {child} in {key} is out of range: {path} is a list of "
                                  f"length {len(cur)} (valid indices 0 to {len(cur) - 1})")
        elif isinstance(cur, dict):
            child = int(part) if part not in cur and part.isdigit() and int(part) in cur else part
        else:
            raise ConfigError(f"-o {item!r}: cannot set '{part}' inside {path}: {path} holds {cur!r} "
                              f"(a {type(cur).__name__}), not a mapping or a list")
        child_path = join_key(path, child)
        if depth == len(parts) - 1:
            if isinstance(cur, dict):
                _merge(cur, {child: value}, path, provenance, source)
            else:
                _forget(provenance, child_path)
                cur[child] = _strip_delete(value, child_path, source)
                _record(provenance, child_path, cur[child], source)
            return
        if isinstance(cur, dict) and cur.get(child) is None:
            _forget(provenance, child_path)
            cur[child] = {}  # dotted keys create the mappings they pass through
        cur, path = cur[child], child_path


def apply_overrides(cfg: dict | Config, overrides: Iterable[str],
                    provenance: Provenance | None = None) -> dict | Config:
    """Apply ``-o KEY=VALUE`` overrides in order (values parsed as YAML) and return ``cfg``.

    ``a.b.c=1`` creates missing mappings; an integer part indexes a list (``pipeline.2.prob=0.1``);
    a mapping value merges into the existing one like a config file would. A ``dict`` is changed in
    place; a ``Config`` gets its data replaced and its provenance updated.
    """
    is_config = isinstance(cfg, Config)
    data = cfg.to_dict() if is_config else cfg
    if provenance is None:
        provenance = cfg_provenance(cfg) if is_config else {}
    for item in overrides:
        parts, value = _parse_override(item)
        _set_override(data, parts, value, item, provenance)
    if is_config:
        checked = make_config(data, cfg.filename, provenance)
        object.__setattr__(cfg, "_cfg_dict", vars(checked)["_cfg_dict"])
        object.__setattr__(cfg, _PROVENANCE_ATTR, provenance)
    return cfg


def config_to_yaml(cfg: Config | Mapping) -> str:
    """The resolved config as plain YAML text (loads back with ``yaml.safe_load`` / ``load_config``)."""
    data = _to_plain(_as_dict(cfg))
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=None, width=110)


def dump_config(cfg: Config | Mapping, path: str | os.PathLike) -> None:
    """Write the resolved config as YAML, atomically (a temp file in the same folder, then rename)."""
    text = config_to_yaml(cfg)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


__all__ = [
    "ConfigError", "MAX_BASE_DEPTH", "OVERRIDE_SOURCE", "apply_overrides", "cfg_provenance",
    "config_to_yaml", "dump_config", "join_key", "load_config", "make_config", "source_of",
]
