"""Export errors: a setup problem (``ExportError``) or a graph unlike PyTorch's (``ExportCheckError``)."""

from __future__ import annotations

from oars.errors import OarsError


class ExportError(OarsError):
    """The export cannot start or finish (missing export section, unsupported format or pipeline step, ...)."""


class ExportCheckError(ExportError):
    """The exported model's outputs differ from PyTorch's beyond tolerance (or its preprocessing does)."""
