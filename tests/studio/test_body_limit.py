"""The upload bound on the wire (oars/studio/body_limit.py): a body sent without a length (chunked) is counted as it
arrives and refused with 413 once it passes ``max_upload_bytes`` plus the form allowance, before Starlette parses
or spools it; a declared length over the bound is refused without reading; bodies under the bound go through."""

from __future__ import annotations

import asyncio

import pytest

from oars.studio.body_limit import MULTIPART_OVERHEAD, BodyLimit
from tests.studio.conftest import csrf_headers

LIMIT = 100_000
JSON = {"Accept": "application/json"}


@pytest.fixture
def limited_client(make_client):
    return make_client(max_upload_bytes=LIMIT)


def _multipart(size: int, boundary: str = "bnd") -> list[bytes]:
    """A multipart body holding one file of ``size`` bytes, in 16 KiB pieces (what a chunked upload sends)."""
    head = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="x.png"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n").encode()
    body = head + b"0" * size + f"\r\n--{boundary}--\r\n".encode()
    return [body[i:i + 16384] for i in range(0, len(body), 16384)]


def _chunked(pieces: list[bytes]):
    yield from pieces


def test_chunked_upload_over_the_limit_is_refused(limited_client):
    headers = {**csrf_headers(limited_client), **JSON, "Content-Type": "multipart/form-data; boundary=bnd"}
    refused = limited_client.post("/exports/any/try", content=_chunked(_multipart(LIMIT + MULTIPART_OVERHEAD + 1)),
                                  headers=headers)
    assert refused.status_code == 413, refused.text
    error = refused.json()["error"]
    assert error.startswith("POST /exports/any/try: the request body passed ")
    assert f"over this studio's upload limit of {LIMIT} bytes" in error and "without a length" in error
    # the same form, as a page (no Accept: JSON): the message as an error block
    page = limited_client.post("/exports/any/try", content=_chunked(_multipart(2 * LIMIT + MULTIPART_OVERHEAD)),
                               headers={k: v for k, v in headers.items() if k != "Accept"})
    assert page.status_code == 413 and page.text.startswith('<div class="error" role="alert">POST /exports/any/try')


def test_chunked_upload_under_the_limit_reaches_the_route(limited_client):
    headers = {**csrf_headers(limited_client), **JSON, "Content-Type": "multipart/form-data; boundary=bnd"}
    passed = limited_client.post("/exports/any/try", content=_chunked(_multipart(LIMIT)), headers=headers)
    assert passed.status_code == 404 and "any" in passed.json()["error"]  # the route's own answer: no such export


def test_declared_length_over_the_limit_is_refused_unread(limited_client):
    body = b"".join(_multipart(LIMIT + MULTIPART_OVERHEAD))
    refused = limited_client.post("/exports/any/try", content=body,
                                  headers={**csrf_headers(limited_client), **JSON,
                                           "Content-Type": "multipart/form-data; boundary=bnd"})
    assert refused.status_code == 413
    assert f"the request body is {len(body)} bytes, over this studio's upload limit of {LIMIT}" in \
        refused.json()["error"]


def test_the_body_stops_being_read_at_the_limit():
    """At the ASGI level: the app reading a 10-piece body gets no piece past the bound, and 413 goes out."""
    pieces = [b"x" * 50_000] * 10
    calls: list[int] = []
    sent: list[dict] = []

    async def receive() -> dict:
        calls.append(1)
        return {"type": "http.request", "body": pieces[len(calls) - 1], "more_body": len(calls) < len(pieces)}

    async def send(message: dict) -> None:
        sent.append(message)

    async def app(scope, receive, send) -> None:  # reads the whole body, as a form parser does
        more = True
        while more:
            more = (await receive())["more_body"]
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"read"})

    scope = {"type": "http", "method": "POST", "path": "/upload", "headers": [], "query_string": b""}
    asyncio.run(BodyLimit(app, limit=10_000)(scope, receive, send))
    assert len(calls) == 2  # 100 000 bytes > 10 000 + the allowance: cut off at the second piece
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 413
    assert b"passed 100000 bytes" in sent[1]["body"]
    # under the bound the app's own answer goes out untouched
    calls.clear()
    sent.clear()
    asyncio.run(BodyLimit(app, limit=10_000_000)(scope, receive, send))
    assert len(calls) == 10 and sent[0]["status"] == 200 and sent[1]["body"] == b"read"
