"""What was set after loading, and why: the ``_resolved_by_oars`` section of a run's ``config.yaml``.

The engine adds hooks, swaps classes and fills defaults the config files do not state; the command line
(``-o``, ``--amp``, ``--work-dir``) changes keys too. A user reading ``<work_dir>/config.yaml`` must see which
values came from where, so every such value is recorded here (key path -> value, source) and written as a
top-level mapping after the config. Loading the file again takes that section out before anything else sees
it (it is a record, not settings: the values it lists are already in the config above it), and keeps it so a
re-run can still say where those values first came from.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from mmengine.config import Config

from oars.config.yaml_io import _to_plain, config_to_yaml

RESOLVED_KEY = "_resolved_by_oars"
_RESOLVED_ATTR = "_oars_resolved"  # in Config.__dict__, outside _cfg_dict: mmengine and dumps never see it
_PREVIOUS_ATTR = "_oars_previous_resolution"  # the section a loaded config.yaml held
_PATH_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
MISSING = object()  # value_at: no value at that path

EARLIER_RUN = " — set in the run that wrote "  # how a note carried over from a loaded config.yaml ends

HEADER = (
    "# {key}: the values oars set or changed after reading the config files, each with its source\n"
    "# (engine: what every run needs; a command-line flag; -o: an override). Every other value above comes\n"
    "# from the config files. Loading this file again skips this section (the values it lists are already\n"
    "# above), so nothing is applied twice.\n"
)


@dataclass(frozen=True)
class Resolved:
    """One value set after loading: where it sits (``custom_hooks[3]``), what it is, and who set it why."""

    key: str
    value: Any
    source: str


def resolved_values(cfg: Config) -> dict[str, Resolved]:
    """Key path -> :class:`Resolved` of ``cfg``, in the order recorded (a live mapping)."""
    found = vars(cfg).get(_RESOLVED_ATTR)
    if found is None:
        found = {}
        object.__setattr__(cfg, _RESOLVED_ATTR, found)
    return found


def record(cfg: Config, key: str, value: Any, source: str, *, replace: bool = True) -> None:
    """Note that ``key`` holds ``value`` because of ``source``; ``replace=False`` keeps an earlier note."""
    values = resolved_values(cfg)
    if replace or key not in values:
        values.pop(key, None)  # a new note goes last: the section reads in the order things happened
        values[key] = Resolved(key, copy.deepcopy(value), source)


def previous_resolution(cfg: Config) -> dict[str, dict[str, Any]]:
    """The ``_resolved_by_oars`` section of the file ``cfg`` was loaded from (``{}`` for a hand-written one)."""
    return vars(cfg).get(_PREVIOUS_ATTR) or {}


def set_previous_resolution(cfg: Config, section: Any) -> None:
    """Keep a loaded ``_resolved_by_oars`` section beside ``cfg`` (only well-formed entries)."""
    kept = {}
    if isinstance(section, Mapping):
        kept = {str(k): dict(v) for k, v in section.items()
                if isinstance(v, Mapping) and "value" in v and isinstance(v.get("source"), str)}
    object.__setattr__(cfg, _PREVIOUS_ATTR, kept)


def value_at(data: Any, key: str) -> Any:
    """The value at key path ``key`` (``a.b[2].c``) in ``data``, or :data:`MISSING`."""
    cur = data
    for name, index in _PATH_PART.findall(key):
        if index:
            if not isinstance(cur, (list, tuple)) or int(index) >= len(cur):
                return MISSING
            cur = cur[int(index)]
        else:
            if not isinstance(cur, Mapping) or name not in cur:
                return MISSING
            cur = cur[name]
    return cur



def resolved_section(cfg: Config, leave_out: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """The ``_resolved_by_oars`` mapping of ``cfg``: only keys still in the config (``leave_out``: top-level keys
    not written, e.g. the run-state keys) whose value is still the recorded one."""
    data = cfg.to_dict()
    section = {}
    for key, item in resolved_values(cfg).items():
        top = _PATH_PART.match(key)
        if top is None or top.group(1) in leave_out:
            continue
        now = value_at(data, key)
        if now is MISSING or _to_plain(now) != _to_plain(item.value):
            continue  # changed again after it was recorded: the note would be wrong
        section[key] = {"value": _to_plain(item.value), "source": item.source}
    return section


def _flow(value: Any) -> str:
    """``value`` as YAML on one line (a scalar, ``{type: X}``, ``[1, 2]``), quoted where YAML needs it."""
    text = yaml.safe_dump([value], default_flow_style=True, allow_unicode=True, width=1 << 30).strip()
    return text[1:-1]  # drop the brackets of the one-item list (a bare scalar would end in "...")


def section_text(section: Mapping[str, Mapping[str, Any]]) -> str:
    """The section as YAML, one key per entry with ``value`` and ``source`` on their own unwrapped lines."""
    lines = [HEADER.format(key=RESOLVED_KEY).rstrip("\n"), f"{RESOLVED_KEY}:"]
    for key, item in section.items():
        lines += [f"  {_flow(key)}:", f"    value: {_flow(item['value'])}", f"    source: {_flow(item['source'])}"]
    return "\n".join(lines) + "\n"


def config_with_provenance(cfg: Config, leave_out: tuple[str, ...] = ()) -> str:
    """``cfg`` as plain YAML followed by its ``_resolved_by_oars`` section (with a comment saying what it is)."""
    text = config_to_yaml(cfg)
    section = resolved_section(cfg, leave_out)
    return f"{text}\n{section_text(section)}" if section else text
