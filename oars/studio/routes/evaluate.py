"""Evaluate: run ``oars.pipelines.evaluate.evaluate`` (with the report) on a run's checkpoint in a background job,
then show its metric tables, per-class results, the worst images (prediction vs ground truth, the report's ranking),
the confusion matrix (each cell a link to the images that fall in it) and the whole report embedded."""

from __future__ import annotations

import cv2
import numpy as np
from fastapi import APIRouter, Form, Request
from fastapi.responses import FileResponse, RedirectResponse, Response

from oars.studio.background import read_status, start_job
from oars.studio.evaluations import (
    MAX_TABLE,
    cell_index,
    cell_picture,
    checkpoint_path,
    checkpoints,
    confusion,
    eval_folder,
    evaluated,
    largest_cells,
    read_confusion_cells,
    read_metrics,
    read_report,
    worst_figure,
    worst_section,
)
from oars.studio.security import REPORT_CSP, NotFound, PathRefused, StudioError
from oars.studio.web import render, settings, workspace
from oars_deploy.words import plural

router = APIRouter()

SINGULAR = {"pixels": "pixel", "boxes": "box", "clips": "clip"}  # a confusion cell's unit, for "1 box"

#: the report is the evaluation's own self-contained HTML: served with nothing allowed but its inline style and
#: embedded pictures (no script, no request anywhere)


def _run(request: Request, run_id: str):
    run_dir = workspace(request).run_dir(run_id)
    if not (run_dir / "config.yaml").is_file():
        raise StudioError(f"run {run_id}: {run_dir} has no config.yaml (the resolved config a training writes); "
                          "nothing to evaluate with")
    return run_dir


def _folder(request: Request, run_id: str, ckpt: str):
    run_dir = workspace(request).run_dir(run_id)
    if ckpt not in evaluated(run_dir):
        raise NotFound(f"run {run_id}: no evaluation of checkpoint {ckpt!r} (start one on the Evaluate page)")
    return eval_folder(run_dir, ckpt)


@router.get("/runs/{run_id}/evaluate")
def evaluate_page(request: Request, run_id: str, ckpt: str = "") -> Response:
    run_dir = _run(request, run_id)
    done = evaluated(run_dir)
    if ckpt and ckpt not in done:
        raise NotFound(f"run {run_id}: no evaluation of checkpoint {ckpt!r} (evaluated: {', '.join(done) or 'none'})")
    shown = ckpt or (done[0] if done else "")
    context: dict = {"run_id": run_id, "checkpoints": checkpoints(run_dir), "evaluated": done, "ckpt": shown}
    if shown:
        folder = eval_folder(run_dir, shown)
        sections = read_report(folder / "report.html")
        cells, no_cells = read_confusion_cells(folder)
        context.update(status=read_status(folder) or {"state": "finished"}, metrics=read_metrics(folder),
                       worst=worst_section(sections), confusion=confusion(sections),
                       has_report=(folder / "report.html").is_file(), cells=cells, no_cells=no_cells,
                       cell_matrix=cells.matrix().tolist() if cells and len(cells.classes) <= MAX_TABLE else None,
                       largest=largest_cells(cells) if cells else [])
    return render(request, "evaluate.html", **context)


@router.post("/runs/{run_id}/evaluate")
def start_evaluation(request: Request, run_id: str, checkpoint: str = Form("")) -> Response:
    """Start evaluating ``checkpoint`` (one of the run's; the newest best one when empty)."""
    run_dir = _run(request, run_id)
    names = checkpoints(run_dir)
    if not names:
        raise StudioError(f"run {run_id}: no checkpoint (*.pth) in {run_dir} yet; train first")
    name = checkpoint or names[0]
    path = checkpoint_path(run_dir, name)
    start_job(eval_folder(run_dir, name), ["evaluate", "--config", str(run_dir / "config.yaml"), "--checkpoint",
                                           str(path)], settings(request).python)
    return RedirectResponse(f"/runs/{run_id}/evaluate?ckpt={name}", status_code=303)


@router.get("/runs/{run_id}/evaluate/{ckpt}/status")
def evaluation_status(request: Request, run_id: str, ckpt: str) -> Response:
    """The job's state (htmx polls it while running; a finished job reloads the page)."""
    status = read_status(_folder(request, run_id, ckpt)) or {"state": "finished"}
    response = render(request, "evaluate_status.html", run_id=run_id, ckpt=ckpt, status=status)
    if status.get("state") != "running" and "HX-Request" in request.headers:
        response.headers["HX-Refresh"] = "true"
    return response


@router.get("/runs/{run_id}/evaluate/{ckpt}/report.html")
def report(request: Request, run_id: str, ckpt: str) -> Response:
    path = _folder(request, run_id, ckpt) / "report.html"
    if not path.is_file():
        raise NotFound(f"run {run_id}: the evaluation of {ckpt} wrote no report.html")
    return FileResponse(path, media_type="text/html", headers={"Content-Security-Policy": REPORT_CSP})


@router.get("/runs/{run_id}/evaluate/{ckpt}/worst/{n}.png")
def worst_png(request: Request, run_id: str, ckpt: str, n: int) -> Response:
    figure, _ = worst_figure(_folder(request, run_id, ckpt), n)
    return Response(figure.png, media_type="image/png")


@router.get("/runs/{run_id}/evaluate/{ckpt}/worst/{n}")
def worst_page(request: Request, run_id: str, ckpt: str, n: int) -> Response:
    figure, count = worst_figure(_folder(request, run_id, ckpt), n)
    return render(request, "evaluate_worst.html", run_id=run_id, ckpt=ckpt, n=n, count=count, caption=figure.caption)


@router.get("/runs/{run_id}/evaluate/{ckpt}/confusion.png")
def confusion_png(request: Request, run_id: str, ckpt: str) -> Response:
    section = confusion(read_report(_folder(request, run_id, ckpt) / "report.html"))
    if section is None or not section.figures:
        raise NotFound(f"run {run_id}: the evaluation of {ckpt} has no confusion matrix")
    return Response(section.figures[0].png, media_type="image/png")


def _cells(request: Request, run_id: str, ckpt: str):
    folder = _folder(request, run_id, ckpt)
    cells, why = read_confusion_cells(folder)
    if cells is None:
        raise NotFound(f"run {run_id}, evaluation of {ckpt}: {why}")
    return folder, cells


@router.get("/runs/{run_id}/evaluate/cell")
def cell_page(request: Request, run_id: str, ckpt: str = "", i: str = "", j: str = "") -> Response:
    """The images that fall in confusion cell (``i``, ``j``) (row ground truth, column prediction), most first."""
    if not ckpt:
        raise NotFound(f"run {run_id}: which evaluation? add ?ckpt=<checkpoint>&i=<row>&j=<column>")
    folder, cells = _cells(request, run_id, ckpt)
    row, col = cell_index(i, "i", cells), cell_index(j, "j", cells)
    ws = workspace(request)
    entries = []
    for n, (image, count) in enumerate(cells.images(row, col)):
        picture = cell_picture(folder, image)
        if picture.kind == "image":
            try:
                if not ws.resolve(image).is_file():
                    picture.kind, picture.why = None, "no such file now (moved or deleted since the evaluation)"
            except PathRefused:
                picture.kind, picture.why = None, "outside the workspace and the registered data roots (not shown)"
        entries.append({"n": n, "image": image, "name": image.replace("\\", "/").rsplit("/", 1)[-1],
                        "count": count, "amount": plural(count, SINGULAR[cells.unit], cells.unit), "kind": picture.kind,
                        "why": picture.why})
    total, images = cells.total(row, col)
    return render(request, "evaluate_cell.html", run_id=run_id, ckpt=ckpt, i=row, j=col, cells=cells,
                  truth=cells.classes[row], predicted=cells.classes[col], entries=entries,
                  total=plural(total, SINGULAR[cells.unit], cells.unit), images=images,
                  in_images=plural(images, "image"))


@router.get("/runs/{run_id}/evaluate/{ckpt}/cell/{i}/{j}/{n}.png")
def cell_png(request: Request, run_id: str, ckpt: str, i: str, j: str, n: int) -> Response:
    """Picture ``n`` of a cell: the report's, a ``--show-dir`` one, or the image file decoded and re-encoded (only
    images inside the workspace and the data roots; a path never comes from the request, only from the cell)."""
    folder, cells = _cells(request, run_id, ckpt)
    listed = cells.images(cell_index(i, "i", cells), cell_index(j, "j", cells))
    if not 0 <= n < len(listed):
        raise NotFound(f"cell ({i}, {j}) of {ckpt}: image {n} is not listed (it lists {len(listed)})")
    picture = cell_picture(folder, listed[n][0])
    if picture.kind == "report":
        return Response(picture.png, media_type="image/png")
    if picture.kind is None:
        raise NotFound(f"{listed[n][0]}: {picture.why}")
    path = workspace(request).resolve(picture.path) if picture.kind == "image" else picture.path
    img = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if img is None:
        raise NotFound(f"{listed[n][0]}: cannot be read as an image (missing or not a picture)")
    scale = 1024 / max(img.shape[:2])
    if scale < 1:
        img = cv2.resize(img, (max(1, round(img.shape[1] * scale)), max(1, round(img.shape[0] * scale))),
                         interpolation=cv2.INTER_AREA)
    _, png = cv2.imencode(".png", img)
    return Response(np.asarray(png).tobytes(), media_type="image/png")
