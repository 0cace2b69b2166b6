"""The base of every user-facing error: tools print its message without a traceback."""


class OarsError(Exception):
    """An error whose message alone tells the user what to fix."""
