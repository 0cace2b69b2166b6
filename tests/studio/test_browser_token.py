"""Scenario 5 of the studio in a real browser: with a token, a page without it goes to the login form and an API
call without it is refused; after logging in, the same pages and calls are accepted."""

from __future__ import annotations

from oars.studio.settings import StudioSettings
from tests.studio.conftest import StudioServer, _free_port

TOKEN = "browser-token-for-the-studio-0123456789"


def test_token_refuses_then_accepts(browser, tmp_path, screenshot):
    server = StudioServer(StudioSettings(workspace=tmp_path / "ws", port=_free_port(), token=TOKEN)).start()
    try:
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        page.set_default_timeout(20_000)
        api = context.request.get(server.url + "/api/runs", headers={"Accept": "application/json"})
        assert api.status == 401 and "access token" in api.json()["error"]
        page.goto(server.url + "/runs")
        assert "/login?next=/runs" in page.url and page.locator("h1").inner_text() == "Log in"
        page.fill("input[name=token]", "not-the-token-at-all")
        page.click("button[type=submit]")
        assert page.locator(".error").inner_text() == "wrong token"
        page.fill("input[name=token]", TOKEN)
        page.click("button[type=submit]")
        page.wait_for_url(server.url + "/runs")
        assert page.locator("h1").count() == 1 and "Log in" not in page.locator("h1").inner_text()
        screenshot(page, "runs_after_login")
        cookies = {c["name"]: c for c in context.cookies()}
        assert cookies["oars_studio_session"]["httpOnly"] and TOKEN not in cookies["oars_studio_session"]["value"]
        assert context.request.get(server.url + "/api/runs", headers={"Accept": "application/json"}).status == 200
        bearer = browser.new_context().request.get(server.url + "/api/runs",
                                                   headers={"Authorization": f"Bearer {TOKEN}"})
        assert bearer.status == 200
        context.close()
    finally:
        server.stop()
