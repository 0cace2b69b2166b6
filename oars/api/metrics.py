"""``Model.val()``'s numbers as an object: ``m["coco/bbox_mAP_50"]``, ``m.coco.bbox_mAP_50`` (the flat key's
``/`` parts as attribute groups), the friendly aliases tasks register (``m.box.map50``, ``m.seg.miou``,
``m.top1``), ``m.to_dict()`` and a short table as its ``repr``.

Why a registry for the friendly names: the flat keys are the evaluators' own (``coco/bbox_mAP_50``, ``mIoU``,
``acc/top1``) and oars names no task, so the core builds only the generic tree; a task says once which of its keys
ultralytics users know under which name: ``register_metric_aliases({"box.map50": "coco/bbox_mAP_50"})`` at import
of its result-records module. An alias whose key a run did not produce is simply absent.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from oars.errors import OarsError

_ALIASES: dict[str, str] = {}


def register_metric_aliases(aliases: Mapping[str, str]) -> None:
    """Add ``{dotted friendly name: flat metric key}`` (``{"box.map50": "coco/bbox_mAP_50"}``).

    Raises:
        ValueError: a friendly name registered already for another key (two tasks must not disagree).
    """
    for name, key in aliases.items():
        if _ALIASES.get(name, key) != key:
            raise ValueError(f"metric alias {name!r} is registered already for {_ALIASES[name]!r}, not {key!r}")
        _ALIASES[name] = key


def metric_aliases() -> dict[str, str]:
    """The registered aliases (a copy)."""
    return dict(_ALIASES)


class MetricGroup:
    """Attribute access to a nested group of numbers (``m.box``, ``m.coco``); ``to_dict()`` gives it as a dict."""

    def __init__(self, path: str, values: dict[str, Any]) -> None:
        self._path = path
        self._values = values

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._values:
            value = self._values[name]
            return MetricGroup(f"{self._path}.{name}" if self._path else name, value) if isinstance(value, dict) \
                else value
        where = f"{self._path}." if self._path else ""
        raise AttributeError(f"no metric {where}{name}; there are: {', '.join(sorted(self._values)) or 'none'}")

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._values))

    def to_dict(self) -> dict[str, Any]:
        """The group as nested dicts of numbers."""
        return _copy(self._values)

    def __repr__(self) -> str:
        return f"MetricGroup({self._path!r}, {self.to_dict()!r})"


def _copy(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _copy(v) if isinstance(v, dict) else v for k, v in values.items()}


def _insert(tree: dict[str, Any], parts: list[str], value: Any, key: str) -> None:
    node = tree
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):  # 'a' is a number and 'a/b' another: keep the number, skip the path
            return
        node = child
    node.setdefault(parts[-1], value)


class Metrics(MetricGroup):
    """The metrics of one evaluation.

    Attributes:
        results: everything :func:`oars.pipelines.evaluate.evaluate` returned (``metrics_file``, ``details``...);
            ``m.results["metrics_file"]`` is where ``metrics.json`` was written.
    """

    def __init__(self, metrics: Mapping[str, Any], results: Mapping[str, Any] | None = None) -> None:
        self.flat = {str(k): v for k, v in metrics.items()}
        self.results = dict(results or {})
        tree: dict[str, Any] = {}
        for key, value in self.flat.items():
            _insert(tree, [p for p in key.split("/") if p], value, key)
        for name, key in _ALIASES.items():
            if key in self.flat:
                _insert(tree, name.split("."), self.flat[key], name)
        super().__init__("", tree)

    def __getitem__(self, key: str) -> Any:
        """``m["coco/bbox_mAP_50"]`` (a flat key as the evaluator names it), a registered alias, or one of
        :attr:`results`' keys (``m["metrics_file"]``; ``m["metrics"]``, the flat dict, as ``val()`` returned
        before it returned this object)."""
        if key in self.flat:
            return self.flat[key]
        if key in _ALIASES and _ALIASES[key] in self.flat:
            return self.flat[_ALIASES[key]]
        if key in self.results:
            return self.results[key]
        raise KeyError(f"no metric {key!r}; there are: {', '.join(self.flat)}")

    def __contains__(self, key: object) -> bool:
        return key in self.flat or (key in _ALIASES and _ALIASES[key] in self.flat)

    def __iter__(self) -> Iterator[str]:
        return iter(self.flat)

    def __len__(self) -> int:
        return len(self.flat)

    def keys(self):
        """The flat keys."""
        return self.flat.keys()

    def items(self):
        """The flat ``(key, value)`` pairs."""
        return self.flat.items()

    def get(self, key: str, default: Any = None) -> Any:
        """``m[key]``, or ``default``."""
        return self[key] if key in self else default

    def to_dict(self) -> dict[str, Any]:
        """The flat ``{key: value}`` the evaluator gave (what ``metrics.json`` holds under ``metrics``)."""
        return dict(self.flat)

    def __repr__(self) -> str:
        if not self.flat:
            return "Metrics(none)"
        width = max(len(k) for k in self.flat)
        rows = [f"{k:<{width}}  {_number(v)}" for k, v in self.flat.items()]
        return "\n".join([f"{'metric':<{width}}  value", *rows])


def _number(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def check_metrics(value: Any) -> Mapping[str, Any]:
    """``evaluate``'s ``metrics`` mapping. Raises OarsError when it is none (a broken evaluator)."""
    if not isinstance(value, Mapping):
        raise OarsError(f"Model.val: the evaluation gave no metrics mapping (got {type(value).__name__})")
    return value
