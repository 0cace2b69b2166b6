"""Fast checks (no Ray instance) of the server's hardening: decompression bombs refused from the header before any
decode (every format), every failure answered as JSON (the ASGI middleware the proxy and the ingress run, the Ray
actor-died mapping), and the warning for a token file other users can read."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import cv2
import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from test_image_header import BOMB, CRAFTED, png_bytes  # noqa: E402

from oars_deploy.serve.json_errors import REPLICA_LOST, STARTING, JsonErrorMiddleware, failure_status  # noqa: E402
from oars_deploy.serve.requests import RequestError, decode_image  # noqa: E402
from oars_deploy.serve.service import token_file_warning  # noqa: E402


@pytest.fixture
def no_decode(monkeypatch):
    """cv2.imdecode raises if called: a refusal must come from the header alone."""

    def refuse(*args, **kwargs):
        raise AssertionError("cv2.imdecode called")

    monkeypatch.setattr(cv2, "imdecode", refuse)


@pytest.mark.parametrize("kind", sorted(CRAFTED))
def test_bomb_of_every_format_is_413_before_decoding(no_decode, kind):
    size = (16383, 16380) if kind in ("WebP-VP8", "WebP-VP8L") else (BOMB, BOMB)
    with pytest.raises(RequestError) as err:
        decode_image(CRAFTED[kind](*size), "big.img", 40_000_000)
    assert err.value.status == 413
    assert err.value.message.startswith(f"big.img: image of {size[0]}x{size[1]} = {size[0] * size[1]} pixels exceeds "
                                        "the server's limit of 40000000 pixels (--max-pixels); declared in its ")
    assert err.value.message.endswith(" header, refused before decoding")


def test_unreadable_headers_are_400_without_decoding(no_decode):
    with pytest.raises(RequestError) as err:
        decode_image(b"\0\0\0\x0cftypheic" + bytes(40), "photo.heic", 40_000_000)  # a format whose size is not read
    assert err.value.status == 400
    assert "photo.heic: could not decode the body as an image: the first bytes are not the header of an image " \
           "format whose size can be read (PNG, JPEG" in err.value.message
    with pytest.raises(RequestError) as err:
        decode_image(png_bytes(30, 20)[:14], "cut.png", 40_000_000)
    assert err.value.status == 400 and "its PNG header is truncated" in err.value.message


def test_small_image_decodes_and_decoded_size_still_checked():
    data = cv2.imencode(".png", np.full((20, 30, 3), 7, np.uint8))[1].tobytes()
    assert decode_image(data, "a.png", 600).shape == (20, 30, 3)
    with pytest.raises(RequestError, match="a.png: image of 30x20 = 600 pixels"):
        decode_image(data, "a.png", 599)


def test_failure_status_maps_a_died_actor_to_503():
    from ray.exceptions import ActorDiedError

    status, message, headers = failure_status(ActorDiedError(), 2)
    assert status == 503 and headers == {"Retry-After": "2"} and message.startswith(REPLICA_LOST)
    assert "ActorDiedError" in message
    assert failure_status(ValueError("bad shape"), 2) == (500, "prediction failed: ValueError: bad shape", {})
    assert failure_status(None, 0)[0:3:2] == (503, {"Retry-After": "1"})


def run_asgi(app, path: str = "/predict") -> tuple[int, dict, dict | bytes]:
    """(status, headers, JSON body or raw bytes) of one request through an ASGI app."""
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    asyncio.run(app({"type": "http", "path": path, "method": "POST", "headers": []}, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    if headers.get("content-type", "").startswith("application/json"):
        return start["status"], headers, json.loads(body)
    return start["status"], headers, body


def inner(status: int | None = None, body: bytes = b"", content_type: bytes = b"text/plain", raise_=None,
          headers: list | None = None):
    """A stand-in for Ray's proxy / the ingress: answers ``status`` with ``body``, raises, or answers nothing."""

    async def app(scope, receive, send):
        if raise_ is not None:
            raise raise_
        if status is None:
            return  # what Ray's proxy does when the replica died mid-request
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", content_type), *(headers or [])]})
        await send({"type": "http.response.body", "body": body[:3], "more_body": True})
        await send({"type": "http.response.body", "body": body[3:], "more_body": False})

    return app


def test_middleware_turns_every_failure_into_json():
    from ray.exceptions import ActorDiedError

    status, headers, body = run_asgi(JsonErrorMiddleware(inner(None), retry_after_s=3))
    assert (status, headers["retry-after"], body) == (503, "3", {"error": REPLICA_LOST})
    status, headers, body = run_asgi(JsonErrorMiddleware(inner(raise_=ActorDiedError()), retry_after_s=1))
    assert status == 503 and headers["retry-after"] == "1" and body["error"].startswith(REPLICA_LOST)
    status, _, body = run_asgi(JsonErrorMiddleware(inner(raise_=KeyError("x")), retry_after_s=1))
    assert (status, body) == (500, {"error": "prediction failed: KeyError: 'x'"})
    overload = inner(503, b"Request dropped due to backpressure", headers=[(b"retry-after", b"1")])
    status, headers, body = run_asgi(JsonErrorMiddleware(overload, retry_after_s=1))
    assert (status, headers["retry-after"], body) == (503, "1", {"error": "Request dropped due to backpressure"})
    # answers that are already JSON, and successes, pass unchanged
    assert run_asgi(JsonErrorMiddleware(inner(413, b'{"error": "big"}', b"application/json")))[::2] == (
        413, {"error": "big"})
    assert run_asgi(JsonErrorMiddleware(inner(200, b"# metrics\n")))[::2] == (200, b"# metrics\n")
    healthz = inner(503, b"Route table is not populated yet.")  # Ray's own health route stays Ray's
    assert run_asgi(JsonErrorMiddleware(healthz), "/-/healthz")[::2] == (503, b"Route table is not populated yet.")


class Wrapper:
    """An ASGI middleware between ours and the proxy (Ray puts its RequestIdMiddleware there, inner app in ``_app``)."""

    def __init__(self, app) -> None:
        self._app = app

    async def __call__(self, scope, receive, send):
        await self._app(scope, receive, send)


class FakeHandle:
    def __init__(self, running: bool) -> None:
        self.running = running

    def running_replicas_populated(self) -> bool:
        return self.running


class FakeRouter:
    """Ray's ProxyRouter as the middleware reads it: routes published or not, replicas running or not."""

    def __init__(self, routes: bool, running: bool) -> None:
        self.routes, self.handle = routes, FakeHandle(running)

    def ready_for_traffic(self, is_head: bool) -> tuple[bool, str]:
        return self.routes, "" if self.routes else "Route table is not populated yet."

    def match_route(self, path: str):
        return ("/", self.handle, False) if self.routes else None


@pytest.mark.parametrize("routes,running,starting", [(False, False, True), (True, False, True), (True, True, False)])
def test_middleware_answers_503_while_the_app_starts(routes, running, starting):
    proxy = inner(404, b"Path '/health' not found. Ping http://.../-/routes for available routes.")
    proxy.proxy_router = FakeRouter(routes, running)
    gate = JsonErrorMiddleware(Wrapper(proxy), retry_after_s=1)
    assert gate.router is proxy.proxy_router  # found through the inner middleware's .app
    status, headers, body = run_asgi(gate, "/health")
    if starting:
        assert (status, headers["retry-after"], body) == (503, "1", {"status": "starting", "error": STARTING})
    else:  # up: Ray answers, as JSON
        assert status == 404 and body["error"].startswith("Path '/health' not found")


def test_token_file_readable_by_others_is_warned(tmp_path, tiny_export, capsys):
    from oars_deploy.serve.cli import check_model_dir, options_from_args, parse_args

    token = tmp_path / "token"
    token.write_text("T\n")
    token.chmod(0o644)
    assert token_file_warning(str(token)) == (f"WARNING: token file {token} is readable by other users (mode 0644); "
                                              f"run chmod 600 {token}")
    check_model_dir(options_from_args(parse_args(["--model-dir", tiny_export, "--token-file", str(token)])))
    assert f"WARNING: token file {token} is readable by other users (mode 0644)" in capsys.readouterr().err
    token.chmod(0o600)
    assert token_file_warning(str(token)) is None
    check_model_dir(options_from_args(parse_args(["--model-dir", tiny_export, "--token-file", str(token)])))
    assert "WARNING" not in capsys.readouterr().err
