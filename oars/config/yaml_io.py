"""Plain YAML in and out: strict reading with file:line:column errors, and writing resolved configs.

Configs are plain YAML (no tags, no Python) so a resolved config written next to a checkpoint loads
again unchanged; both directions live here so they keep agreeing on what "plain" means.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

import yaml
from mmengine.config import Config

from oars.config.errors import ConfigError
from oars.config.provenance import join_key
from oars_deploy.atomic import atomic_write

YAML_SUFFIXES = (".yaml", ".yml")


# ----------------------------------------------------------------------------- reading


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


def _not_utf8(path: str, err: UnicodeDecodeError) -> ConfigError:
    """Where the first byte that is not UTF-8 sits (line, column), and what to do about it."""
    before = err.object[:err.start]
    line = before.count(b"\n") + 1
    column = len(before[before.rfind(b"\n") + 1:].decode("utf-8", errors="replace")) + 1  # characters, not bytes
    shown = err.object.splitlines()[line - 1].decode("utf-8", errors="replace") if err.object else ""
    return ConfigError(f"{path}:{line}:{column}: not UTF-8 text: byte 0x{err.object[err.start]:02x} cannot be "
                       f"decoded (line {line}, column {column}):\n    {shown}\n  configs are read as UTF-8; save "
                       "the file as UTF-8 (the editor's encoding setting, or `iconv -f latin1 -t utf-8`)")


def _read_yaml(path: str) -> dict:
    """Parse one file into a mapping, with errors that give file, line and column."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as err:
        raise ConfigError(f"{path}: cannot read config file: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise _not_utf8(path, err) from None
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


# ----------------------------------------------------------------------------- plain data and writing


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


def config_to_yaml(cfg: Config | Mapping) -> str:
    """The resolved config as plain YAML text (loads back with ``yaml.safe_load`` / ``load_config``)."""
    data = _to_plain(_as_dict(cfg))
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=None, width=110)


def dump_config(cfg: Config | Mapping, path: str | os.PathLike) -> None:
    """Write the resolved config as YAML, atomically (``oars_deploy.atomic.atomic_write``, normal permissions)."""
    atomic_write(path, config_to_yaml(cfg))
