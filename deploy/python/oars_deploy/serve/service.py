"""What one ``oars-serve`` replica does, without Ray: load and warm the model in the background, answer health,
check the bearer token, read a bounded body and turn it into the model's input.

:mod:`oars_deploy.serve.app` wraps this in a Ray Serve deployment (HTTP routes, ``@serve.batch``); keeping the
logic here lets tests drive it directly (health before the model is ready, token checks) and keeps the HTTP layer
thin.
"""

from __future__ import annotations

import hmac
import os
import stat
import threading
import traceback
from collections.abc import AsyncIterator
from typing import Any

from oars_deploy.errors import DeployError, UserError
from oars_deploy.serve.models import ServedModel, load_served
from oars_deploy.serve.options import ServeOptions
from oars_deploy.serve.requests import RequestError


def read_token(path: str) -> str:
    """The bearer token: the first line of ``path``, stripped.

    Raises:
        DeployError: the file cannot be read or its first line is empty (the message names the file, never the
            token).
    """
    try:
        with open(path, encoding="utf-8") as f:
            token = f.readline().strip()
    except OSError as err:
        raise DeployError(f"--token-file {path}: cannot read it ({err.strerror})") from None
    if not token:
        raise DeployError(f"--token-file {path}: its first line is empty; expected the bearer token")
    return token


def token_file_warning(path: str) -> str | None:
    """The warning for a token file other local users can read or write (as ssh warns about a private key), or None.

    Why a warning and not a refusal: the token only guards this server's routes and files made by ``echo T > token``
    get mode 0644 by default, so refusing would break the common case; the warning says the fix (ssh refuses a key,
    but its config-file checks only warn). Group or others' write permission is reported the same way.
    """
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None  # read_token says why it cannot be read
    if not mode & 0o077:
        return None
    who = "readable" if mode & 0o044 else "accessible"
    return f"WARNING: token file {path} is {who} by other users (mode {mode:04o}); run chmod 600 {path}"


class ModelService:
    """One replica's state and request checks (see the module docstring).

    Args:
        options: the application's :class:`ServeOptions`.
        load_now: load and warm the model in this thread (tests); else call :meth:`start` for a background load.
    """

    def __init__(self, options: ServeOptions, load_now: bool = False) -> None:
        self.options = options
        self.token = read_token(options.token_file) if options.token_file else None
        self.model: ServedModel | None = None
        self.error: str | None = None
        self.ready = False
        if load_now:
            self.load()

    def start(self) -> threading.Thread:
        """Load and warm the model in a daemon thread (the replica answers /health with 503 meanwhile)."""
        thread = threading.Thread(target=self.load, name="oars-serve-load", daemon=True)
        thread.start()
        return thread

    def load(self) -> None:
        """Load the export and run it once; on failure keep the message (/health then says it, with 503)."""
        try:
            model = load_served(self.options.model_dir, self.options.device, self.options.backend)
            if hasattr(model, "topk"):
                model.topk = self.options.topk
            model.warmup()
            self.model = model
            self.ready = True
        except UserError as err:
            self.error = str(err)
        except Exception as err:  # noqa: BLE001  (a replica must report, not die silently)
            self.error = f"{type(err).__name__}: {err}"
            traceback.print_exc()

    def health(self) -> tuple[int, dict]:
        """(status, body): 200 once the model is loaded and has run once, else 503 with why."""
        if self.ready:
            return 200, {"status": "ok", "predictor": self.model.kind if self.model else None}
        if self.error is not None:
            return 503, {"status": "failed", "error": self.error}
        return 503, {"status": "loading"}

    def check_ready(self) -> ServedModel:
        """The model, or a 503 :class:`RequestError` with Retry-After while it loads (or after it failed)."""
        if not self.ready or self.model is None:
            why = f"the model failed to load: {self.error}" if self.error else "the model is still loading"
            raise RequestError(503, why, {"Retry-After": str(max(1, self.options.retry_after_s))})
        return self.model

    def check_auth(self, authorization: str | None) -> None:
        """Raise a 401 :class:`RequestError` unless ``authorization`` is ``Bearer <token>`` (constant-time compare;
        the token is never put in a message or a log)."""
        if self.token is None:
            return
        scheme, _, given = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self.token.encode()):
            what = "missing" if not authorization else "wrong"
            raise RequestError(401, f"{what} bearer token: send the header 'Authorization: Bearer <token>' with the "
                                    "token of the server's --token-file", {"WWW-Authenticate": "Bearer"})

    async def read_body(self, content_length: str | None, chunks: AsyncIterator[bytes]) -> bytes:
        """The request body, refused with 413 as soon as it is known to exceed ``max_body_mb`` (from
        Content-Length before reading, else while reading)."""
        limit = self.options.max_body_bytes
        message = f"request body exceeds the server's limit of {self.options.max_body_mb:g} MiB (--max-body-mb)"
        if content_length is not None and content_length.strip().isdigit() and int(content_length) > limit:
            raise RequestError(413, message)
        parts, size = [], 0
        async for chunk in chunks:
            size += len(chunk)
            if size > limit:
                raise RequestError(413, message)
            parts.append(chunk)
        return b"".join(parts)

    def decode(self, body: bytes, content_type: str | None, filename: str | None) -> tuple[str, Any]:
        """(the record's ``input`` name, the model input) of a request body
        (:meth:`ServedModel.decode_request`); 4xx :class:`RequestError` when unusable."""
        model = self.check_ready()
        return model.decode_request(body, content_type, filename, self.options.max_pixels)

    def predict(self, items: list[tuple[str, Any]]) -> list[dict]:
        """The records of a batch of decoded requests, in order (one model call)."""
        model = self.check_ready()
        results = model.predict([item for _, item in items])
        return [model.record(name, item, result) for (name, item), result in zip(items, results)]
