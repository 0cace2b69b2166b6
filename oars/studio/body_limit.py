"""The upload bound on the wire: a pure-ASGI middleware that counts every request's body bytes as they arrive and
answers 413 as soon as the count passes the studio's ``max_upload_bytes`` (plus room for the form's other fields).

Why here and not in the route: a route sees an upload only after Starlette has parsed the multipart body, which it
spools to a temporary file whatever its size; a chunked request (no ``Content-Length``) cannot be refused on its
declared size either. Counting in ``receive`` stops both before anything is parsed or written.
"""

from __future__ import annotations

import html
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from oars.studio.web import wants_json

#: form fields and multipart boundaries around the file in an upload's body
MULTIPART_OVERHEAD = 64 * 1024


class _TooLarge(Exception):
    """Raised from ``receive`` inside the app once the body passes the limit (caught by the middleware)."""


def body_limit_message(method: str, path: str, limit: int, size: int, declared: bool = True) -> str:
    """The one refusal of a request body over the limit (naming the request, its size and the limit).

    Args:
        method, path: the request refused.
        limit: ``max_upload_bytes``.
        size: the declared ``Content-Length``, or the bytes counted when the body was cut off.
        declared: whether ``size`` is the whole body's declared size (else: at least that much arrived).
    """
    seen = f"is {size} bytes" if declared else f"passed {size} bytes (sent without a length, cut off there)"
    return (f"{method} {path}: the request body {seen}, over this studio's upload limit of {limit} bytes "
            f"({limit / 2**20:.1f} MiB; oars-studio's max_upload_bytes)")


class BodyLimit:
    """ASGI middleware: 413 for a request whose body (declared or counted) exceeds ``limit + MULTIPART_OVERHEAD``.

    Args:
        app: the wrapped ASGI app.
        limit: the upload limit in bytes (``StudioSettings.max_upload_bytes``).
    """

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit
        self.allowed = limit + MULTIPART_OVERHEAD

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.allowed:
            await self._refuse(scope, receive, send, declared, True)
            return
        state = {"received": 0, "over": False, "refused": False}

        async def counted_receive() -> dict:
            message = await receive()
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                if state["received"] > self.allowed:
                    state["over"] = True
                    raise _TooLarge()
            return message

        async def refuse_once() -> None:
            if not state["refused"]:
                state["refused"] = True
                await self._refuse(scope, receive, send, state["received"], False)

        async def watched_send(message: dict) -> None:
            if state["over"]:  # whatever the app answers to a body it could not read (a parse error): the 413
                await refuse_once()
                return
            await send(message)

        try:
            await self.app(scope, counted_receive, watched_send)
        except Exception:
            # the app may wrap the exception raised in its receive (a task group, a form parser): the flag says
            if not state["over"]:
                raise
        if state["over"]:
            await refuse_once()

    async def _refuse(self, scope: dict, receive: Any, send: Any, size: int, declared: bool) -> None:
        """Answer 413 with the one-line message: JSON for API calls, else the message as an error block (what htmx
        swaps in place, and a readable page on its own)."""
        request = Request(scope)
        message = body_limit_message(scope.get("method", ""), scope.get("path", ""), self.limit, size, declared)
        response: Response
        if wants_json(request):
            response = JSONResponse({"error": message}, status_code=413, headers={"Connection": "close"})
        else:
            response = HTMLResponse(f'<div class="error" role="alert">{html.escape(message)}</div>', status_code=413,
                                    headers={"Connection": "close"})
        await response(scope, receive, send)


def _content_length(scope: dict) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
