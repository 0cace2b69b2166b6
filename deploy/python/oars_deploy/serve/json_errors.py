"""Every failure of ``oars-serve`` as the JSON error the application answers (``{"error": message}``), including
the ones Ray Serve's HTTP proxy produces itself.

Why: the application's own refusals are JSON, but three answers came from Ray's side of the port in other shapes:
``404 Path '/health' not found`` (plain text) while the proxy listens before the application's route is deployed,
a plain-text ``500 Internal Server Error`` for a request in flight when its replica dies (the proxy catches the
``RayActorError`` and sends nothing; uvicorn fills in the 500), and plain-text 503 / 408 bodies for overload and
timeouts. :class:`JsonErrorMiddleware` is a pure ASGI middleware that fixes all of them:

- while the application is starting (the proxy has no route yet, or the route's deployment has never had a running
  replica) every request gets ``503`` + ``Retry-After`` with ``{"status": "starting", "error": ...}``: the answer
  ``/health`` gives while the model loads, from the moment the port accepts connections;
- a request whose inner app returns without an answer (the replica died mid-request; Ray Serve restarts it) or
  raises gets ``503`` + ``Retry-After`` when a Ray actor died (:func:`failure_status`), else ``500``, as JSON;
- a plain-text error answer (status >= 400) is re-sent as ``{"error": text}`` with its status and headers.

Ray's own ``/-/healthz`` and ``/-/routes`` are left as Ray answers them. The proxy loads the middleware through Ray
Serve's ``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH`` (:data:`PROXY_CALLBACK`, set by ``oars-serve`` before its Ray
instance starts); the application's FastAPI ingress adds it too (exceptions of any route).
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]

#: what ``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH`` names (Ray Serve calls it in its HTTP proxy actor)
PROXY_CALLBACK = "oars_deploy.serve.json_errors:proxy_middlewares"
#: the environment variable that tells the proxy's middleware the Retry-After seconds (set by ``oars-serve``)
RETRY_AFTER_ENV = "OARS_SERVE_RETRY_AFTER_S"
STARTING = ("the server is starting: the model's deployment is not running yet (GET /health answers 200 once the "
            "model is loaded)")
REPLICA_LOST = ("the model replica handling this request stopped before answering (Ray Serve restarts it); retry "
                "the request")


def retry_after_default() -> int:
    """The Retry-After seconds: :data:`RETRY_AFTER_ENV` when it holds a whole number >= 0, else 1."""
    value = os.environ.get(RETRY_AFTER_ENV, "1").strip()
    return max(1, int(value)) if value.isdigit() else 1


def is_actor_died(err: BaseException) -> bool:
    """Whether ``err`` says a Ray actor (a replica) died or is unreachable: Ray restarts replicas, so a retry can
    succeed. False when Ray is not importable."""
    try:
        from ray.exceptions import RayActorError
    except ImportError:
        return False
    return isinstance(err, RayActorError)


def failure_status(err: BaseException | None, retry_after_s: int) -> tuple[int, str, dict[str, str]]:
    """(status, message, headers) of a failed request: ``err`` None (the inner app gave no answer) or a died Ray
    actor -> 503 with Retry-After; any other exception -> 500 naming its type and message."""
    retry = {"Retry-After": str(max(1, retry_after_s))}
    if err is None:
        return 503, REPLICA_LOST, retry
    if is_actor_died(err):
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        return 503, f"{REPLICA_LOST} ({type(err).__name__}{': ' + first[:300] if first else ''})", retry
    return 500, f"prediction failed: {type(err).__name__}: {err}", {}


async def send_json(send: Send, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
    """One whole JSON answer on an ASGI ``send``."""
    data = json.dumps(body).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    raw += [(k.lower().encode("latin-1"), str(v).encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": data, "more_body": False})


def _header(message: Message, name: bytes) -> bytes:
    for key, value in message.get("headers", []):
        if key.lower() == name:
            return value
    return b""


def find_proxy_router(app: Any, depth: int = 8) -> Any:
    """The Ray Serve proxy's route table object under ``app`` (ASGI middlewares keep their inner app in ``.app``,
    Ray's RequestIdMiddleware in ``._app``; Ray's HTTP proxy holds it in ``.proxy_router``), or None (outside the
    proxy, or Ray's internals differ: then the start-up gate is off and Ray answers as it does)."""
    for _ in range(depth):
        if app is None:
            return None
        router = getattr(app, "proxy_router", None)
        if router is not None and hasattr(router, "ready_for_traffic") and hasattr(router, "match_route"):
            return router
        app = getattr(app, "app", None) or getattr(app, "_app", None)
    return None


class JsonErrorMiddleware:
    """The pure ASGI middleware of the module docstring.

    Args:
        app: the inner ASGI app (Ray's HTTP proxy, or the FastAPI ingress).
        retry_after_s: the Retry-After of its 503s (None: :func:`retry_after_default`).
        router: the proxy's route table (None: looked up under ``app``, :func:`find_proxy_router`).
    """

    def __init__(self, app: Any, retry_after_s: int | None = None, router: Any = None) -> None:
        self.app = app
        self.retry_after_s = retry_after_default() if retry_after_s is None else retry_after_s
        self.router = router if router is not None else find_proxy_router(app)

    def starting(self, path: str) -> bool:
        """Whether the application behind the proxy is not up yet for ``path``: no route table, or the matched
        deployment has never had a running replica (where Ray would answer 404 or hold the request)."""
        if self.router is None:
            return False
        try:
            if not self.router.ready_for_traffic(True)[0]:
                return True
            matched = self.router.match_route(path)
            return matched is not None and not matched[1].running_replicas_populated()
        except Exception:  # noqa: BLE001  (Ray's internals changed: Ray answers as it does)
            return False

    async def __call__(self, scope: Scope, receive: Callable, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("path", "").startswith("/-/"):
            await self.app(scope, receive, send)
            return
        retry = {"Retry-After": str(max(1, self.retry_after_s))}
        if self.starting(scope.get("path", "")):
            await send_json(send, 503, {"status": "starting", "error": STARTING}, retry)
            return
        state: dict[str, Any] = {"started": False, "held": None, "body": []}

        async def guarded(message: Message) -> None:
            kind = message.get("type")
            if kind == "http.response.start":
                if message.get("status", 200) >= 400 and not _header(message, b"content-type").startswith(
                        b"application/json"):
                    state["held"] = message  # a plain-text error: re-sent as JSON once its body is complete
                    return
                state["started"] = True
            elif kind == "http.response.body" and state["held"] is not None:
                state["body"].append(message.get("body", b""))
                if message.get("more_body", False):
                    return
                held, state["held"], state["started"] = state["held"], None, True
                text = b"".join(state["body"]).decode("utf-8", "replace").strip()
                keep = {k.decode("latin-1"): v.decode("latin-1") for k, v in held.get("headers", [])
                        if k.lower() not in (b"content-type", b"content-length")}
                await send_json(send, held["status"], {"error": text or f"HTTP {held['status']}"}, keep)
                return
            await send(message)

        try:
            await self.app(scope, receive, guarded)
        except Exception as err:  # noqa: BLE001  (every failure answers JSON)
            if state["started"]:
                raise
            status, message, headers = failure_status(err, self.retry_after_s)
            await send_json(send, status, {"error": message}, headers)
            return
        if not state["started"]:
            status, message, headers = failure_status(None, self.retry_after_s)
            await send_json(send, status, {"error": message}, headers)


def proxy_middlewares() -> list:
    """The Ray Serve HTTP proxy callback (:data:`PROXY_CALLBACK`): ``[Middleware(JsonErrorMiddleware)]``."""
    from starlette.middleware import Middleware

    return [Middleware(JsonErrorMiddleware)]
