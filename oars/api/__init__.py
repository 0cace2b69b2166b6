"""The Python API: ``from oars import Model`` (:mod:`oars.api.model`) and its per-input :class:`Result`."""

from .model import Model
from .result import Result

__all__ = ["Model", "Result"]
