"""The studio's walls, through its routes: token, CSRF, paths, and refusing to serve the network without a token."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from oars.studio.cli import main, parse_args, settings_from_args
from oars.studio.security import PathRefused, StudioError, read_token_file, resolve_inside
from tests.studio.conftest import csrf_headers

TOKEN = "s3cret-token-for-tests-0123456789"


def test_open_paths_and_redirect_without_login(make_client):
    client = make_client(token=TOKEN)
    assert client.get("/health").json() == {"status": "ok"}
    assert client.get("/static/vendor/htmx-2.0.11.min.js").status_code == 200
    response = client.get("/runs")
    assert response.status_code == 303 and response.headers["location"] == "/login?next=/runs"
    api = client.get("/runs", headers={"Accept": "application/json"})
    assert api.status_code == 401 and "access token" in api.json()["error"]


def test_login_sets_httponly_cookie_and_bearer_works(make_client):
    client = make_client(token=TOKEN)
    wrong = client.post("/login", data={"token": "nope", "next": "/runs"})
    assert wrong.status_code == 401 and "wrong token" in wrong.text
    ok = client.post("/login", data={"token": TOKEN, "next": "//evil.example/x"})
    assert ok.status_code == 303 and ok.headers["location"] == "/"  # never redirected off the studio
    cookie = ok.headers["set-cookie"]
    assert "HttpOnly" in cookie and TOKEN not in cookie
    assert client.get("/health").status_code == 200
    bearer = make_client(token=TOKEN)
    bearer.cookies.clear()
    assert bearer.get("/", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 303  # -> /runs, not login
    assert bearer.get("/", headers={"Authorization": "Bearer wrong"}).headers["location"].startswith("/login")


def test_state_changing_request_needs_csrf(make_client):
    # /login is the one POST exempt; any other POST without this browser's token is refused before its route runs
    client = make_client(token=TOKEN)
    calls = []
    client.app.post("/api/echo")(lambda: calls.append(1) or {"ok": True})
    client.post("/login", data={"token": TOKEN})
    refused = client.post("/api/echo")
    assert refused.status_code == 403 and "CSRF token" in refused.json()["error"] and not calls
    wrong = client.post("/api/echo", headers={"X-CSRF-Token": "forged"})
    assert wrong.status_code == 403 and not calls
    assert client.post("/api/echo", headers=csrf_headers(client)).json() == {"ok": True}
    form = client.post("/api/echo", data={"csrf_token": client.cookies["oars_studio_csrf"]})
    assert form.status_code == 200 and len(calls) == 2
    bearer = make_client(token=TOKEN)  # an API client with the bearer token needs no CSRF token
    bearer.app.post("/api/echo")(lambda: {"ok": True})
    assert bearer.post("/api/echo", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_paths_stay_inside(tmp_path: Path):
    root = tmp_path / "ws"
    (root / "a").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "link").symlink_to(outside)
    assert resolve_inside("a", [root], root) == (root / "a").resolve()
    for bad in ("../outside", str(outside), "link", "a/../../outside", "a\x00b"):
        with pytest.raises(PathRefused, match="outside the workspace|NUL"):
            resolve_inside(bad, [root], root)
    assert resolve_inside(str(outside), [root, outside], root) == outside.resolve()


def test_network_host_needs_token_file(tmp_path: Path, capsys):
    with pytest.raises(StudioError, match="--host 0.0.0.0: serving beyond this machine needs --token-file"):
        settings_from_args(parse_args(["--workspace", str(tmp_path), "--host", "0.0.0.0"]))
    with pytest.raises(SystemExit) as exit_info:
        main(["--workspace", str(tmp_path), "--host", "0.0.0.0"])
    assert exit_info.value.code == 2 and "needs --token-file" in capsys.readouterr().err
    short = tmp_path / "short.txt"
    short.write_text("abc\n")
    with pytest.raises(StudioError, match="at least 16 characters"):
        read_token_file(short)
    with pytest.raises(StudioError, match="cannot read it"):
        read_token_file(tmp_path / "missing.txt")
    good = tmp_path / "token.txt"
    good.write_text(TOKEN + "\n")
    os.chmod(good, 0o600)
    settings = settings_from_args(parse_args(["--workspace", str(tmp_path), "--host", "0.0.0.0",
                                              "--token-file", str(good)]))
    assert settings.token == TOKEN
