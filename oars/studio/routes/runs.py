"""Runs: the table of runs (launched here or registered from a terminal), compare several, and one run's page with
live curves (server-sent events), stop and resume.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, Response, StreamingResponse

from oars.studio import jobs, run_files, runs_view
from oars.studio.security import REPORT_CSP, NotFound, StudioError
from oars.studio.web import render, settings, templates, workspace

router = APIRouter()
#: how often a live run page's event stream looks at the run's files while lines arrive ...
POLL_S = 1.0
#: ... backing off to this while nothing changes
POLL_MAX_S = 3.0
#: the job's state (queue, process alive) is asked at least this often even when no file changed (a killed job)
STATUS_EVERY_S = 5.0


def _rows(request: Request) -> list[dict]:
    ws = workspace(request)
    runs_view.discover(ws)
    jobs.schedule(ws, settings(request))
    return [runs_view.run_row(ws, run_id) for run_id in ws.run_ids()]


@router.get("/runs")
def runs_page(request: Request, note: str = "") -> Response:
    """The runs table, the register form and the compare selection."""
    return render(request, "runs.html", rows=_rows(request), note=note)


@router.get("/api/runs")
def runs_api(request: Request) -> JSONResponse:
    """Every run as JSON (the table's columns plus work dir, progress and the failure message)."""
    return JSONResponse({"runs": _rows(request)})


@router.post("/runs/register")
def register(request: Request, work_dir: str = Form("")) -> Response:
    """Index a work dir made in a terminal (it must hold ``config.yaml``)."""
    run_id = runs_view.register(workspace(request), work_dir)
    return RedirectResponse(f"/runs/{run_id}", status_code=303)


@router.post("/runs/{run_id}/remove")
def remove(request: Request, run_id: str, delete_folder: str = Form("")) -> Response:
    """Remove a run from the index; delete its folder only when its name is typed in ``delete_folder``."""
    note = runs_view.remove(workspace(request), run_id, delete_folder)
    if "HX-Request" in request.headers:
        return Response(status_code=200, headers={"HX-Redirect": "/runs"})
    return RedirectResponse(f"/runs?note={_quote(note)}", status_code=303)


def _quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")


@router.get("/runs/compare")
def compare(request: Request, ids: list[str] = Query(default=[]), key: str = "") -> Response:
    """Several runs: one scalar's curves overlaid and the diff of their resolved configs."""
    ws = workspace(request)
    ids = list(dict.fromkeys(ids))
    if len(ids) < 2:
        raise StudioError("compare: select at least two runs (ids=A&ids=B)")
    for run_id in ids:
        ws.run_dir(run_id)  # NotFound names an unknown id
    keys = runs_view.compare_keys(ws, ids)
    if key and key not in keys:
        raise StudioError(f"compare: key {key!r} is not logged by every selected run; they share: "
                          f"{', '.join(keys) or 'none'}")
    key = key or ("loss" if "loss" in keys else keys[0] if keys else "")
    query = "&".join(f"ids={_quote(i)}" for i in ids)
    return render(request, "runs_compare.html", ids=ids, keys=keys, key=key, query=query,
                  diffs=runs_view.config_diffs(ws, ids))


@router.get("/runs/compare/scalars.json")
def compare_scalars(request: Request, key: str, ids: list[str] = Query(default=[])) -> JSONResponse:
    """One scalar of the selected runs, on a shared x axis."""
    ws = workspace(request)
    for run_id in ids:
        ws.run_dir(run_id)
    return JSONResponse(runs_view.compare_curves(ws, ids, key))


@router.get("/runs/{run_id}")
def run_page(request: Request, run_id: str) -> Response:
    """One run: status, progress with ETA, curves, the log tail; live while it runs."""
    ws = workspace(request)
    jobs.schedule(ws, settings(request))
    view = runs_view.live_view(ws, run_id)
    return render(request, "run.html", run=view, has_report=runs_view.report_file(ws, run_id) is not None,
                  drawn=runs_view.drawn_counts(ws, run_id))


@router.get("/runs/{run_id}/live")
def live_part(request: Request, run_id: str) -> Response:
    """The live part of the run's page alone (what each event carries; also for a page without JavaScript)."""
    return render(request, "run_live.html", run=runs_view.live_view(workspace(request), run_id))


@router.get("/runs/{run_id}/scalars.json")
def scalars(request: Request, run_id: str, part: str = "loss") -> JSONResponse:
    """The run's curves (``part``: loss, lr, other, val, all) as ``{x, x_label, series}``."""
    return JSONResponse(runs_view.curves_json(workspace(request), run_id, part))


@router.get("/runs/{run_id}/events")
async def events(request: Request, run_id: str, train: int = 0, val: int = 0) -> StreamingResponse:
    """Server-sent events: a ``status`` event (the live part's HTML, with the curve points logged since the page
    drew ``train`` training and ``val`` validation lines) whenever the run's scalar log, text log or job record
    changes; an ``end`` event once the run is no longer running.

    What one look costs is what the studio costs a watched run: the files are only ``stat``-ed (sizes and times)
    and read when those changed; the job's state (the index, the process) is asked only then or every
    :data:`STATUS_EVERY_S`; the looks are :data:`POLL_S` apart while lines arrive, backing off to
    :data:`POLL_MAX_S` while nothing changes."""
    ws = workspace(request)
    work_dir = ws.run_dir(run_id)
    studio = settings(request)

    async def stream() -> AsyncIterator[str]:
        last_files, last_state, drawn = None, None, (max(0, train), max(0, val))
        pause, status_due = POLL_S, 0.0
        loop = asyncio.get_running_loop()
        while True:
            if await request.is_disconnected():
                return
            files = await asyncio.to_thread(run_files.files_signature, work_dir)
            state = last_state
            if files != last_files or loop.time() >= status_due:
                state = await asyncio.to_thread(_job_state, ws, studio, run_id)
                status_due = loop.time() + STATUS_EVERY_S
            if files != last_files or state != last_state:
                last_files, last_state, pause = files, state, POLL_S
                view, points, drawn = await asyncio.to_thread(_live, ws, run_id, drawn)
                yield _event("status", templates.get_template("run_live.html").render(run=view, points=points))
                if not view["live"]:
                    yield _event("end", json.dumps({"status": view["status"]}))
                    return
            else:
                pause = min(POLL_MAX_S, pause * 1.5)
            await asyncio.sleep(pause)

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def _job_state(ws, studio, run_id: str) -> str:
    jobs.schedule(ws, studio)
    return jobs.run_status(ws, run_id).state


def _live(ws, run_id: str, drawn: tuple[int, int]) -> tuple[dict, str, tuple[int, int]]:
    """The live part, the new curve points as JSON (safe inside a ``<script>`` element), the new drawn counts."""
    view = runs_view.live_view(ws, run_id)
    points, drawn = runs_view.new_points(ws, run_id, drawn)
    return view, json.dumps(points, separators=(",", ":")).replace("</", "<\\/"), drawn


def _event(name: str, data: str) -> str:
    lines = "".join(f"data: {line}\n" for line in data.splitlines() or [""])
    return f"event: {name}\n{lines}\n"


@router.post("/runs/{run_id}/stop")
def stop(request: Request, run_id: str) -> Response:
    """Ctrl-C to the run's job (the last checkpoint is kept); a queued run leaves the queue."""
    jobs.stop(workspace(request), settings(request), run_id)
    return RedirectResponse(f"/runs/{run_id}", status_code=303)


@router.post("/runs/{run_id}/resume")
def resume(request: Request, run_id: str) -> Response:
    """Continue a stopped or failed run from its last checkpoint in the same work dir."""
    jobs.resume(workspace(request), settings(request), run_id)
    return RedirectResponse(f"/runs/{run_id}", status_code=303)


@router.get("/runs/{run_id}/report.html")
def report(request: Request, run_id: str) -> FileResponse:
    """The run's ``report.html`` (``tools/eval.py --report`` run with the work dir as its ``--work-dir``), served
    from its work dir with the Evaluate room's Content-Security-Policy (no script, no request)."""

    path = runs_view.report_file(workspace(request), run_id)
    if path is None:
        raise NotFound(f"run {run_id}: no report.html in its work dir (the Evaluate page writes one per checkpoint)")
    return FileResponse(path, media_type="text/html", headers={"Content-Security-Policy": REPORT_CSP})
