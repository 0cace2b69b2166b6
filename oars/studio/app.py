"""The studio's app factory: one FastAPI app over one workspace, with its walls (token, CSRF, paths) in place.

Pages are the modules of :data:`PAGES` (one module a page, each with an ``APIRouter`` named ``router``); this file
only assembles them and installs the checks every request goes through.
"""

from __future__ import annotations

from urllib.parse import quote

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from oars.studio.body_limit import BodyLimit
from oars.studio.routes import auth, datasets, evaluate, exports, home, runs, train
from oars.studio.security import (
    CSRF_COOKIE,
    CSRF_FIELD,
    CSRF_HEADER,
    SAFE_METHODS,
    SESSION_COOKIE,
    AccessRefused,
    StudioError,
    bearer_ok,
    cookie_ok,
    csrf_ok,
    new_csrf_token,
)
from oars.studio.settings import StudioSettings
from oars.studio.web import STATIC_DIR, error_response, wants_json
from oars.studio.workspace import Workspace

#: the studio's rooms, in the order their routes are matched
PAGES = (home, auth, runs, train, datasets, evaluate, exports)
#: paths served without login: the login form itself, the vendored files, and the health probe
OPEN_PATHS = ("/login", "/static/", "/health")


def create_app(settings: StudioSettings) -> FastAPI:
    """A studio app over ``settings.workspace`` (created when missing).

    Args:
        settings: the workspace, host and limits (see :class:`StudioSettings`).

    Returns:
        The FastAPI app; ``app.state.workspace`` and ``app.state.settings`` hold what routes read.
    """
    app = FastAPI(title="oars studio", docs_url=None, redoc_url=None, openapi_url=None,
                  dependencies=[Depends(_check_csrf)])
    app.state.settings = settings
    app.state.workspace = Workspace(settings.workspace, settings.data_roots)
    app.mount("/static", StaticFiles(directory=str(STATIC_DIR)), name="static")
    for page in PAGES:
        app.include_router(page.router)
    app.middleware("http")(_login_and_csrf_cookie)
    app.add_middleware(BodyLimit, limit=settings.max_upload_bytes)  # outermost: counts bytes before any parsing
    app.add_exception_handler(StudioError, error_response)  # type: ignore[arg-type]
    return app


async def _login_and_csrf_cookie(request: Request, call_next) -> Response:
    """Every request: refuse it without the token (when the studio has one), and give a browser without a CSRF
    cookie a fresh one (the pages embed it; state-changing requests must send it back)."""
    request.state.new_csrf = new_csrf_token()
    studio: StudioSettings = request.app.state.settings
    path = request.url.path
    if studio.token and not path.startswith(OPEN_PATHS) and not _logged_in(request, studio.token):
        if wants_json(request) or request.method not in SAFE_METHODS:
            return JSONResponse({"error": "this studio needs its access token: log in at /login, or send "
                                          "'Authorization: Bearer <token>'"}, status_code=401)
        return RedirectResponse(f"/login?next={quote(path)}", status_code=303)
    response = await call_next(request)
    if CSRF_COOKIE not in request.cookies:
        response.set_cookie(CSRF_COOKIE, request.state.new_csrf, httponly=True, samesite="strict")
    return response


def _logged_in(request: Request, token: str) -> bool:
    return bearer_ok(request.headers.get("authorization"), token) or cookie_ok(request.cookies.get(SESSION_COOKIE),
                                                                              token)


async def _check_csrf(request: Request) -> None:
    """A state-changing request from a browser must carry its CSRF token (header ``X-CSRF-Token``, which htmx
    sends on every request, or the form field ``csrf_token``); one with the bearer token needs none."""
    if request.method in SAFE_METHODS or request.url.path == "/login":
        return
    studio: StudioSettings = request.app.state.settings
    if studio.token and bearer_ok(request.headers.get("authorization"), studio.token):
        return
    sent = request.headers.get(CSRF_HEADER)
    if sent is None and "form" in request.headers.get("content-type", ""):
        sent = (await request.form()).get(CSRF_FIELD)
    if not csrf_ok(sent if isinstance(sent, str) else None, request.cookies.get(CSRF_COOKIE)):
        raise AccessRefused(f"{request.method} {request.url.path}: refused without this page's CSRF token (reload "
                            "the page and try again)")
