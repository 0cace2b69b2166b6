"""The studio's walls: who may call it (a token beyond the loopback), which requests may change state (a CSRF
token), and which files a request may name (inside the workspace or a registered data root only).

Why a token cookie *and* a CSRF token: the cookie proves the browser logged in, but a browser sends cookies with
requests other sites trigger too; a state-changing request must also carry the per-browser CSRF token that only
the studio's own pages can read (double-submit). A bearer token (API calls, scripts) is never sent by a browser on
its own, so a request that carries it needs no CSRF token.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from oars.errors import OarsError
from oars.studio.settings import LOOPBACK_HOSTS, StudioSettings

SESSION_COOKIE = "oars_studio_session"
CSRF_COOKIE = "oars_studio_csrf"
CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: the policy of every report page the studio serves from a run (its report.html embeds its pictures as data: URLs;
#: nothing in it may run a script, load from elsewhere or frame anything but the studio)
REPORT_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; frame-ancestors 'self'"


class StudioError(OarsError):
    """A request the studio refuses or cannot do; its message is shown as is (HTTP 400 unless ``status`` says)."""

    status = 400


class AccessRefused(StudioError):
    """A request without the token, or without the CSRF token on a state-changing call."""

    status = 403


class PathRefused(StudioError):
    """A path from a request that resolves outside the workspace and the registered data roots."""

    status = 403


class NotFound(StudioError):
    """A run, data set, export or file the request names that the studio does not have."""

    status = 404


def check_serving(settings: StudioSettings) -> None:
    """Refuse to start on a non-loopback host without a token: anyone on the network could launch jobs.

    Raises:
        StudioError: naming the host and the flag to add.
    """
    if settings.host not in LOOPBACK_HOSTS and not settings.token:
        raise StudioError(f"--host {settings.host}: serving beyond this machine needs --token-file FILE (a file "
                          "holding the access token); without one the studio binds 127.0.0.1 only")


def read_token_file(path: str | os.PathLike) -> str:
    """The token in ``path`` (its first line, stripped).

    Raises:
        StudioError: the file is missing, unreadable or empty, or the token is shorter than 16 characters.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise StudioError(f"--token-file {path}: cannot read it ({err.strerror or err})") from None
    token = text.strip().splitlines()[0].strip() if text.strip() else ""
    if len(token) < 16:
        raise StudioError(f"--token-file {path}: expected a token of at least 16 characters on its first line, "
                          f"got {len(token)} (make one with: python -c \"import secrets; "
                          f"print(secrets.token_urlsafe())\" > {path})")
    return token


def session_value(token: str) -> str:
    """The login cookie's value: a keyed hash of the token, so the cookie never holds the token itself."""
    return hmac.new(token.encode(), b"oars-studio-session", hashlib.sha256).hexdigest()


def bearer_ok(authorization: str | None, token: str) -> bool:
    """Whether an ``Authorization: Bearer ...`` header carries ``token`` (compared in constant time)."""
    if not authorization or not authorization.lower().startswith("bearer "):
        return False
    return hmac.compare_digest(authorization[7:].strip().encode(), token.encode())


def cookie_ok(cookie: str | None, token: str) -> bool:
    """Whether the login cookie matches ``token``."""
    return bool(cookie) and hmac.compare_digest(cookie.encode(), session_value(token).encode())


def new_csrf_token() -> str:
    """A fresh per-browser CSRF token."""
    return secrets.token_urlsafe(24)


def csrf_ok(sent: str | None, cookie: str | None) -> bool:
    """Whether the CSRF token a request sent (header or form field) equals its browser's CSRF cookie."""
    return bool(sent) and bool(cookie) and hmac.compare_digest(sent.encode(), cookie.encode())


def resolve_inside(raw: str | os.PathLike, roots: list[Path], base: Path) -> Path:
    """``raw`` as an absolute path with symlinks followed, if it lies inside one of ``roots``.

    Args:
        raw: a path from a request; relative paths are taken from ``base`` (the workspace).
        roots: the folders requests may reach (the workspace, registered data roots).
        base: the folder relative paths start from.

    Returns:
        The resolved path (it need not exist).

    Raises:
        PathRefused: the path escapes every root (``..``, an absolute path elsewhere, a symlink out), or holds a
            NUL byte.
    """
    text = os.fspath(raw)
    if "\x00" in text:
        raise PathRefused(f"path {text!r}: holds a NUL byte")
    path = Path(text).expanduser()
    resolved = (path if path.is_absolute() else base / path).resolve()
    for root in roots:
        if resolved.is_relative_to(root.resolve()):
            return resolved
    raise PathRefused(f"path {text}: outside the workspace and the registered data roots; the studio reads and "
                      "writes only there")
