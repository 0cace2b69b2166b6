"""The studio in a real browser (Debian's chromium through Playwright): the vendored libraries load, nothing is
fetched from outside, and the pages render at a laptop's width."""

from __future__ import annotations


def test_vendored_scripts_load_and_nothing_leaves_the_machine(studio_server, page, screenshot):
    requested = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(studio_server.url + "/login")
    assert page.evaluate("typeof htmx") == "object"
    assert page.evaluate("typeof uPlot") == "function"
    assert page.evaluate("typeof oarsStudio") == "object"
    assert requested and all(url.startswith(studio_server.url) for url in requested), requested
    assert page.locator("h1").inner_text() == "Log in"
    assert screenshot(page, "login").stat().st_size > 1000
