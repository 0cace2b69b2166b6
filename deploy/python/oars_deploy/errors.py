"""The base of every user-facing error in oars and its runtime: command-line tools print the message alone."""

from __future__ import annotations


class UserError(Exception):
    """An error whose message alone tells the user what to fix (no traceback needed)."""
