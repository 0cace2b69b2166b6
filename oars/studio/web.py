"""What every studio route uses: the templates, the workspace and settings of the app serving the request, the
CSRF token its pages embed, and how a refusal is shown (a page with the one-line message, or JSON for API calls)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.templating import Jinja2Templates

from oars.studio.security import CSRF_COOKIE, CSRF_FIELD, CSRF_HEADER, StudioError
from oars.studio.settings import StudioSettings
from oars.studio.workspace import Workspace

TEMPLATES_DIR = Path(__file__).parent / "templates"
STATIC_DIR = Path(__file__).parent / "static"
templates = Jinja2Templates(directory=str(TEMPLATES_DIR))

#: the navigation bar: (path, label); each page module owns the path it names
NAV = (("/runs", "Runs"), ("/train", "Train"), ("/datasets", "Datasets"), ("/exports", "Exports"))


def workspace(request: Request) -> Workspace:
    """The workspace of the app serving ``request``."""
    return request.app.state.workspace


def settings(request: Request) -> StudioSettings:
    """The settings of the app serving ``request``."""
    return request.app.state.settings


def csrf_token(request: Request) -> str:
    """This browser's CSRF token: its cookie, or the one the auth middleware made for this response."""
    return request.cookies.get(CSRF_COOKIE) or request.state.new_csrf


def wants_json(request: Request) -> bool:
    """Whether the caller is an API client (``/api/`` paths, or JSON asked for) rather than a page."""
    return request.url.path.startswith("/api/") or "application/json" in request.headers.get("accept", "")


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """A page: ``template`` with ``context`` plus what every page uses (navigation, CSRF token, login state).

    An htmx request (``HX-Request`` header) gets the same template; partial templates simply do not extend
    ``base.html``.
    """
    context.update(request=request, nav=NAV, csrf_token=csrf_token(request), csrf_field=CSRF_FIELD,
                   csrf_header=CSRF_HEADER, studio=settings(request), is_htmx="HX-Request" in request.headers)
    return templates.TemplateResponse(request, template, context, status_code=status_code)


def error_response(request: Request, err: StudioError) -> Response:
    """A refusal as the caller reads it: JSON ``{"error": message}`` for API calls, else the error page."""
    status = getattr(err, "status", 400)
    if wants_json(request):
        return JSONResponse({"error": str(err)}, status_code=status)
    if "HX-Request" in request.headers:  # shown in place by htmx (base.html swaps error responses in)
        return HTMLResponse(f'<div class="error" role="alert">{_escape(str(err))}</div>', status_code=status)
    return render(request, "error.html", status_code=status, message=str(err))


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
