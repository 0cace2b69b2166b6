"""The deploy predictor's user-facing error (printed without a traceback by infer.py)."""

from __future__ import annotations

from oars.export.errors import ExportError


class DeployError(ExportError):
    """A deploy folder, an input or a runtime that cannot be used; the message says what was expected."""
