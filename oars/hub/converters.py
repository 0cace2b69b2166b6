"""Converters of published checkpoints, by name: the task packages declare them, the hub looks names up here.

A hub entry (``oars/hub/torchvision.yaml``) names the converter its state dict needs (``torchvision_rcnn``); the task
that owns that model declares the name with the function that does the work through its contract,
:meth:`oars.task_roles.Commands.hub_converters`, as a ``"module:function"`` string so that nothing heavy is imported::

    def hub_converters(self):
        return {"torchvision_rcnn": ("<package>.models.convert_torchvision:rcnn_from_torchvision",
                                     {"classes": "coco80"})}

This table asks the registered tasks for them when a name is looked up (no import-time side effect);
:func:`register_converter` adds one in code (tests). The core never names a task.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from oars.errors import OarsError

Converter = Callable[..., Mapping[str, Any]]


class ConverterError(OarsError, KeyError):
    """A converter name nobody registered, registered twice, or a target that cannot be imported."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class RegisteredConverter:
    """One registration: the function (``"module:attr"`` or a callable), the keyword arguments bound to it, and the
    package that registered it (shown as the entry's task by ``tools/hub.py list``)."""

    name: str
    target: str | Converter
    package: str
    options: dict[str, Any] = field(default_factory=dict)

    def resolve(self) -> Converter:
        """The callable, importing ``module`` of a ``"module:attr"`` target on first use.

        Raises:
            ConverterError: the module or attribute does not exist (a registration that points nowhere).
        """
        if callable(self.target):
            return self.target
        module, _, attr = self.target.partition(":")
        try:
            fn = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as err:
            raise ConverterError(f"hub converter {self.name!r} is registered as {self.target!r}, which cannot be "
                                 f"imported: {err}") from None
        return fn

    def __call__(self, checkpoint: Mapping[str, Any]) -> Mapping[str, Any]:
        """Convert a loaded checkpoint (a torchvision state dict) into our model's state dict.

        Args:
            checkpoint: parameter name -> tensor, as the published file holds it.

        Returns:
            our parameter name -> tensor (the converter's own result).
        """
        return self.resolve()(checkpoint, **self.options)


_CONVERTERS: dict[str, RegisteredConverter] = {}


def register_converter(name: str, target: str | Converter, **options: Any) -> RegisteredConverter:
    """Register ``target`` as the hub converter ``name`` (one registration per converter, in the owning task).

    Args:
        name: what hub entries call it (``oars/hub/torchvision.yaml``'s ``converter``).
        target: ``"package.module:function"`` (imported when first used) or the function itself; it is called as
            ``target(checkpoint, **options)`` and returns our model's state dict.
        **options: keyword arguments bound to every call (e.g. ``classes="coco80"``).

    Returns:
        the registration.

    Raises:
        ConverterError: ``name`` is already registered with another target (a silent overwrite would change which
            weights a config loads).
    """
    package = (target.partition(":")[0] if isinstance(target, str) else target.__module__).partition(".")[0]
    entry = RegisteredConverter(name, target, package, dict(options))
    old = _CONVERTERS.get(name)
    if old is not None and (old.target, old.options) != (entry.target, entry.options):
        raise ConverterError(f"hub converter {name!r} is already registered (by {old.package}: {old.target}); "
                             f"refusing to replace it with {target!r}")
    _CONVERTERS[name] = entry
    return entry


def unregister_converter(name: str) -> None:
    """Remove a registration (tests that register their own)."""
    _CONVERTERS.pop(name, None)


def _load_tasks() -> None:
    """Register the hub converters every registered task declares (``task.commands.hub_converters()``)."""
    from oars.tasks import TASKS

    for scope in sorted(TASKS):
        for name, target in TASKS[scope].commands.hub_converters().items():
            path, options = (target, {}) if isinstance(target, str) else target
            register_converter(name, path, **options)


def registered_converters() -> dict[str, RegisteredConverter]:
    """Every registered converter by name, after the tasks have loaded."""
    _load_tasks()
    return dict(_CONVERTERS)


def get_converter(name: str) -> RegisteredConverter:
    """The converter registered as ``name``.

    Raises:
        ConverterError: no task registered it (the message lists the registered names).
    """
    if name not in _CONVERTERS:
        _load_tasks()
    if name not in _CONVERTERS:
        known = ", ".join(sorted(_CONVERTERS)) or "none"
        raise ConverterError(f"no hub converter named {name!r} is registered (registered: {known}); the task that "
                             "owns the model declares it in its contract (Commands.hub_converters)")
    return _CONVERTERS[name]
