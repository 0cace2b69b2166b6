"""The config error type, in its own module so every ``oars.config.*`` module can raise it without
importing the ``oars.config`` package (which imports them)."""

from __future__ import annotations

from oars.errors import OarsError


class ConfigError(OarsError):
    """A config problem; the message names the file, the key and what to fix."""

