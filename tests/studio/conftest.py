"""The studio's shared fixtures: a test client over a fresh workspace per test (route tests), and one real studio
server plus one real browser per session (browser tests: Debian's chromium driven by Playwright, never a browser
Playwright downloads).

Screenshots: :func:`screenshot` writes each page's picture under ``$OARS_STUDIO_SCREENSHOTS`` (``docs/images/studio``
when the docs are refreshed), else under the session's temporary folder.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

fastapi = pytest.importorskip("fastapi", reason="the studio extra is not installed (pip install -e .[studio])")
from fastapi.testclient import TestClient  # noqa: E402

from oars.studio.app import create_app  # noqa: E402
from oars.studio.security import CSRF_COOKIE, CSRF_HEADER  # noqa: E402
from oars.studio.settings import StudioSettings  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
REPO = Path(__file__).resolve().parents[2]


def csrf_headers(client: TestClient) -> dict[str, str]:
    """The CSRF header a studio page would send (the client's cookie, set by any earlier GET)."""
    if CSRF_COOKIE not in client.cookies:
        client.get("/health")
        client.get("/login")
    return {CSRF_HEADER: client.cookies[CSRF_COOKIE]}


@pytest.fixture
def make_client(tmp_path: Path) -> Callable[..., TestClient]:
    """A function that builds a TestClient over a fresh workspace: ``make_client(token=..., data_roots=(...))``."""

    def build(**kwargs) -> TestClient:
        kwargs.setdefault("workspace", tmp_path / "workspace")
        client = TestClient(create_app(StudioSettings(**kwargs)), follow_redirects=False)
        client.get("/login")  # a first page: the CSRF cookie
        return client

    return build


@pytest.fixture
def client(make_client) -> TestClient:
    """A TestClient over a fresh workspace, no token (loopback)."""
    return make_client()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class StudioServer:
    """A real studio on 127.0.0.1 in a thread of the test process (uvicorn), over one workspace."""

    def __init__(self, settings: StudioSettings) -> None:
        import uvicorn

        self.settings = settings
        self.app = create_app(settings)
        self.url = f"http://127.0.0.1:{settings.port}"
        self._server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=settings.port,
                                                     log_level="warning"))
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    @property
    def workspace(self):
        return self.app.state.workspace

    def start(self) -> StudioServer:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the studio server did not start")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)


@pytest.fixture(scope="session")
def studio_server(tmp_path_factory) -> Iterator[StudioServer]:
    """One studio server for the session's browser tests, reading the repository's data/ (demo sets) too."""
    workspace = tmp_path_factory.mktemp("studio") / "workspace"
    settings = StudioSettings(workspace=workspace, port=_free_port(), data_roots=(REPO / "data", REPO / "configs"))
    server = StudioServer(settings).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    """One headless Debian chromium for the session (skipped with the reason when it or Playwright is missing)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (dev extra)")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium chromium-driver)")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        yield browser
        browser.close()


@pytest.fixture
def page(browser) -> Iterator[object]:
    """A fresh browser page (its own cookies) at a laptop's 1280 x 800."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(20_000)
    yield page
    context.close()


@pytest.fixture(scope="session")
def screenshot_dir(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("OARS_STUDIO_SCREENSHOTS") or tmp_path_factory.mktemp("studio_screens"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def screenshot(screenshot_dir: Path) -> Callable[[object, str], Path]:
    """``screenshot(page, "runs")`` writes ``runs.png`` (full page) and returns its path."""

    def take(page, name: str) -> Path:
        path = screenshot_dir / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


def copy_tree(src: Path, dst: Path) -> Path:
    """A copy of ``src`` at ``dst`` (tests plant problems in copies, never in the shared demo data)."""
    shutil.copytree(src, dst)
    return dst
