"""The base of every user-facing error: tools print its message without a traceback."""

from oars_deploy.errors import UserError


class OarsError(UserError):
    """An error whose message alone tells the user what to fix."""


class DataError(OarsError, ValueError):
    """Bad data or data settings (label values out of range, unreadable files, bad transform arguments)."""


class DataFileNotFoundError(OarsError, FileNotFoundError):
    """A file or folder that the config points to does not exist."""
