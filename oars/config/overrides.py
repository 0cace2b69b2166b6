"""Command-line ``-o KEY=VALUE`` overrides: parse each item, set it in the config, record ``-o`` as
its source.

Values are parsed as YAML and mappings merge like a config file would, so an override behaves like
one more file on top; errors name the ``-o`` item and say how to write it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml
from mmengine.config import Config

from oars.config.errors import ConfigError
from oars.config.merge import _merge, _strip_delete
from oars.config.mmengine_config import _PROVENANCE_ATTR, cfg_provenance, make_config
from oars.config.provenance import Provenance, _forget, _record, join_key
from oars.config.yaml_io import _StrictSafeLoader

OVERRIDE_SOURCE = "-o"


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
