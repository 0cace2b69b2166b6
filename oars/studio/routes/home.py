"""The front page (the runs table is where work starts) and the health probe scripts poll."""

from fastapi import APIRouter
from fastapi.responses import RedirectResponse

router = APIRouter()


@router.get("/", include_in_schema=False)
def home() -> RedirectResponse:
    return RedirectResponse("/runs", status_code=303)


@router.get("/health")
def health() -> dict:
    """``{"status": "ok"}`` while the studio serves (open without login: it tells nothing about the workspace)."""
    return {"status": "ok"}
