"""Login: a form that takes the access token and sets an HttpOnly session cookie (a keyed hash of the token)."""

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response

from oars.studio.security import SESSION_COOKIE, session_value
from oars.studio.web import render, settings

router = APIRouter()


@router.get("/login")
def login_form(request: Request, next: str = "/") -> Response:
    return render(request, "login.html", next=_local(next), message=None)


@router.post("/login")
def login(request: Request, token: str = Form(""), next: str = Form("/")) -> Response:
    """Check the token; on success set the session cookie and go to ``next`` (a path on this studio only)."""
    expected = settings(request).token
    if not expected:
        return RedirectResponse(_local(next), status_code=303)
    if token.strip() != expected:
        return render(request, "login.html", status_code=401, next=_local(next), message="wrong token")
    response = RedirectResponse(_local(next), status_code=303)
    response.set_cookie(SESSION_COOKIE, session_value(expected), httponly=True, samesite="strict")
    return response


def _local(target: str) -> str:
    """``target`` if it is a path on this studio; ``/`` for anything that would leave it (``//host``, URLs)."""
    return target if target.startswith("/") and not target.startswith("//") and "\\" not in target else "/"
