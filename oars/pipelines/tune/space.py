"""A search space over config keys, read from YAML, for ``tools/tune.py``.

The file maps ``-o`` key paths to one distribution each, so whatever a config can set a search can vary::

    optim_wrapper.optimizer.lr: {type: float, low: 1.0e-4, high: 1.0e-1, log: true}
    optim_wrapper.optimizer.weight_decay: {type: float, low: 0.0, high: 1.0e-3}
    param_scheduler.0.end: {type: int, low: 0, high: 200, step: 50}
    train_pipeline.3.prob: {type: choice, values: [0.0, 0.5]}

Why a file of our own rather than Optuna's or Ray's API: the same space drives both engines (Optuna's
``suggest_*`` in one process, Ray Tune's search-space objects on a cluster), is checked against the config before
a trial starts (a misspelt key gets did-you-mean, an empty or inverted range is refused), and is recorded in the
study, so a re-run with another space is refused instead of mixing two searches.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from oars.config.errors import ConfigError
from oars.config.registry_lookup import closest
from oars.config.yaml_io import _read_yaml

KINDS = ("float", "int", "choice")


class SearchSpaceError(ConfigError):
    """A search-space file that cannot drive a search; the message names the file, the key and the fix."""


@dataclass(frozen=True)
class Param:
    """One searched key.

    Attributes:
        key: the ``-o`` path (``optim_wrapper.optimizer.lr``). kind: ``float``, ``int`` or ``choice``.
        low, high: the closed range of ``float``/``int``. log: sample on a log scale. step: ``int``/``float`` grid.
        values: the options of ``choice`` (plain YAML values).
    """

    key: str
    kind: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    values: tuple[Any, ...] = ()

    def describe(self) -> dict:
        """The plain-data form written into the study (to refuse a re-run with another space)."""
        return {"key": self.key, "kind": self.kind, "low": self.low, "high": self.high, "log": self.log,
                "step": self.step, "values": list(self.values)}


def _number(path: str, key: str, field: str, value: Any, kind: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SearchSpaceError(f"{path}: {key}.{field} = {value!r}; a {kind} range needs finite numbers "
                               f"(e.g. {{type: {kind}, low: 1, high: 10}})")
    if kind == "int" and not float(value).is_integer():
        raise SearchSpaceError(f"{path}: {key}.{field} = {value!r}; an int range needs whole numbers")
    return value


def _param(path: str, key: str, spec: Any) -> Param:
    if not isinstance(spec, Mapping):
        raise SearchSpaceError(f"{path}: {key} = {spec!r}; each key needs a mapping such as "
                               "{type: float, low: 0.001, high: 0.1, log: true} or {type: choice, values: [a, b]}")
    kind = spec.get("type")
    if kind not in KINDS:
        near = closest(str(kind), list(KINDS))
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise SearchSpaceError(f"{path}: {key}.type = {kind!r}{hint}; expected one of {', '.join(KINDS)}")
    allowed = {"float": {"type", "low", "high", "log", "step"}, "int": {"type", "low", "high", "log", "step"},
               "choice": {"type", "values"}}[kind]
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise SearchSpaceError(f"{path}: {key}: {', '.join(map(repr, unknown))} not accepted for type {kind}; "
                               f"accepted: {', '.join(sorted(allowed))}")
    if kind == "choice":
        values = spec.get("values")
        if not isinstance(values, list) or not values:
            raise SearchSpaceError(f"{path}: {key}.values = {values!r}; a choice needs a non-empty list of values")
        return Param(key, kind, values=tuple(values))
    if "low" not in spec or "high" not in spec:
        raise SearchSpaceError(f"{path}: {key}: a {kind} range needs both low and high")
    low, high = (_number(path, key, f, spec[f], kind) for f in ("low", "high"))
    if low >= high:
        raise SearchSpaceError(f"{path}: {key}: the range [{low}, {high}] is {'empty' if low == high else 'inverted'}"
                               "; low must be below high (a fixed value belongs in the config, not the space)")
    log = spec.get("log", False)
    if not isinstance(log, bool):
        raise SearchSpaceError(f"{path}: {key}.log = {log!r}; expected true or false")
    if log and low <= 0:
        raise SearchSpaceError(f"{path}: {key}: log: true needs low > 0 (got {low})")
    step = spec.get("step")
    if step is not None:
        step = _number(path, key, "step", step, kind)
        if step <= 0 or log:
            raise SearchSpaceError(f"{path}: {key}.step = {step!r}; a step must be positive and cannot be "
                                   "combined with log: true")
    return Param(key, kind, low=low, high=high, log=log, step=step)


def _lookup(data: Any, key: str) -> tuple[bool, str, list[str]]:
    """Whether ``key`` (dotted, integers index lists) exists in ``data``; else the part that is missing and the
    names beside it (for did-you-mean)."""
    cur, walked = data, []
    for part in key.split("."):
        if isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        elif isinstance(cur, Mapping) and part in cur:
            cur = cur[part]
        else:
            if isinstance(cur, Mapping):
                names = [str(k) for k in cur]
            else:
                names = [str(i) for i in range(len(cur))] if isinstance(cur, list) else []
            return False, ".".join(walked + [part]), names
        walked.append(part)
    return True, key, []


@dataclass(frozen=True)
class SearchSpace:
    """The parameters of a search, in file order, and the file they came from."""

    params: tuple[Param, ...]
    source: str

    def describe(self) -> list[dict]:
        return [p.describe() for p in self.params]

    def fingerprint(self) -> str:
        """A canonical JSON text of the space (what a resumed study compares)."""
        return json.dumps(self.describe(), sort_keys=True)

    def check_keys(self, cfg: Mapping) -> None:
        """Refuse a key the config does not have (a search over a typo would vary nothing), with did-you-mean.

        Raises:
            SearchSpaceError: naming the space file, the key, the missing part and the closest names.
        """
        data = cfg.to_dict() if hasattr(cfg, "to_dict") else cfg
        for param in self.params:
            found, missing, names = _lookup(data, param.key)
            if not found:
                parent, _, last = missing.rpartition(".")
                near = [f"{parent}.{n}" if parent else n for n in closest(last, names)]
                hint = f"; did you mean {', '.join(map(repr, near))}?" if near else ""
                raise SearchSpaceError(f"{self.source}: {param.key} is not a key of the config ({missing} does not "
                                       f"exist){hint}")


def load_space(path: str | os.PathLike) -> SearchSpace:
    """Read and check a search-space YAML file.

    Args:
        path: the file (a mapping of key path -> ``{type: float|int|choice, ...}``).

    Returns:
        The :class:`SearchSpace`, parameters in file order.

    Raises:
        SearchSpaceError: a missing or empty file, an unknown type, an empty/inverted range, a bad log range.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise SearchSpaceError(f"--space {path}: no such file; a search space is a YAML mapping of config keys to "
                               "{type: float|int|choice, ...}")
    data = _read_yaml(path)
    return SearchSpace(tuple(_param(path, str(key), spec) for key, spec in data.items()), path)


def overrides_for(params: Mapping[str, Any]) -> list[str]:
    """``-o`` strings setting each searched key to its trial value (JSON, which the override parser reads as
    YAML, so lists and strings keep their type)."""
    return [f"{key}={json.dumps(value)}" for key, value in params.items()]
