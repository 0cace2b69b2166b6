"""The config error type, in its own module so every ``oars.config_*`` module can raise it without
importing ``oars.config`` (which imports them)."""

from __future__ import annotations

from oars.errors import OarsError


class ConfigError(OarsError):
    """A config problem; the message names the file, the key and what to fix."""

