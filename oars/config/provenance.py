"""Key paths (``model.backbone``, ``pipeline[2]``) and provenance: which file set each leaf key.

Kept apart from loading so merging, ``-o`` overrides and the config check all record and look up
sources the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Provenance = dict[str, str]
_Source = Callable[[str], str]


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

