"""Datasets: register a config's split (optionally on a folder, a URL, a shards folder or URL, or a dataset
description file), see every problem ``tools/check_data.py`` finds per file (on a random sample of a large URL or
shards set), class counts, the size histogram and a paged grid of samples drawn with their annotations, filtered by
class or by "has a problem". The check and the scan run as a background job (a large data set takes minutes); the
page shows "checking… n of N" until it ends. A URL's storage options come from the config (never from the form)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Form, Request
from fastapi.responses import FileResponse, RedirectResponse, Response

from oars.studio.configs import catalogue, resolve_config
from oars.studio.datasets import SCAN_SAMPLE, SPLITS, DatasetEntry, DatasetIndex, data_location, load_entry_config
from oars.studio.samples import PAGE_SIZE, sample_picture
from oars.studio.security import NotFound, StudioError
from oars.studio.web import render, settings, workspace

router = APIRouter()


def _index(request: Request) -> DatasetIndex:
    return DatasetIndex(workspace(request))


def user_errors_shown(func, *args):
    """Call ``func``; a pipeline's user error (a bad config key, a missing split) becomes the studio's refusal with
    the same one-line message."""
    from oars_deploy.errors import UserError, user_message

    try:
        return func(*args)
    except StudioError:
        raise
    except UserError as err:
        raise StudioError(user_message(err)) from None


@router.get("/datasets")
def datasets_page(request: Request) -> Response:
    index = _index(request)
    rows = []
    for entry in index.all():
        scan = index.read_scan(entry) or {}
        status = index.scan_status(entry) or {}
        rows.append({"entry": entry, "samples": len(scan.get("samples", [])), "state": status.get("state"),
                     "problems": len(scan.get("problems", []))})
    return render(request, "datasets.html", rows=rows, catalogue=catalogue(), splits=SPLITS, scan_sample=SCAN_SAMPLE)


@router.post("/datasets")
def register_dataset(request: Request, config: str = Form(""), split: str = Form("train"),
                     data: str = Form("")) -> Response:
    """Register a data set and start its check and scan in the background, then show it (303 to its page)."""
    ws = workspace(request)
    config_path = resolve_config(ws, config)
    data_path = data_location(ws, data) if data.strip() else None
    if isinstance(data_path, Path) and not data_path.exists():
        raise StudioError(f"data {data.strip()}: nothing there (give a folder or a dataset description file)")
    index = _index(request)
    entry = user_errors_shown(index.add, config_path, split, data_path)
    _start_scan(request, index, entry)
    return RedirectResponse(f"/datasets/{entry.id}", status_code=303)


def _start_scan(request: Request, index: DatasetIndex, entry: DatasetEntry) -> dict:
    """Load the entry's config here (a bad key or description is refused at once, with its one-line message),
    then start the scan job."""
    user_errors_shown(load_entry_config, entry)
    return index.start_scan(entry, settings(request).python)


@router.post("/datasets/{dataset_id}/scan")
def rescan(request: Request, dataset_id: str) -> Response:
    """Check and read the data set again (after fixing files), in the background."""
    index = _index(request)
    _start_scan(request, index, index.get(dataset_id))
    return RedirectResponse(f"/datasets/{dataset_id}", status_code=303)


@router.get("/datasets/{dataset_id}")
def dataset_page(request: Request, dataset_id: str, page: int = 1, cls: str = "", problem: int = 0) -> Response:
    """The data set's check, counts, sizes and grid (the last finished scan), with the running scan's progress."""
    index = _index(request)
    entry = index.get(dataset_id)
    scan = index.read_scan(entry)
    status = index.scan_status(entry)
    if scan is None and status is None:  # registered before (or by another studio): scan it now
        status = _start_scan(request, index, entry)
    scan = scan or {}
    classes = scan.get("classes", [])
    if cls and scan and cls not in classes:
        raise StudioError(f"cls {cls!r}: not a class of this data set ({', '.join(classes) or 'none'})")
    wanted = classes.index(cls) if cls in classes else None
    shown = [(i, s) for i, s in enumerate(scan.get("samples", []))
             if (wanted is None or wanted in s["classes"]) and (not problem or s["problem"])]
    pages = max(1, -(-len(shown) // PAGE_SIZE))
    page = min(max(1, page), pages)
    grid = shown[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]
    return render(request, "dataset.html", entry=entry, scan=scan, status=status, grid=grid, page=page, pages=pages,
                  cls=cls, problem=problem, matching=len(shown), stamp=int(scan.get("time", 0)))


@router.get("/datasets/{dataset_id}/status")
def scan_status(request: Request, dataset_id: str) -> Response:
    """The scan job's progress (htmx polls it; once the job ended, an htmx request reloads the page)."""
    index = _index(request)
    entry = index.get(dataset_id)
    status = index.scan_status(entry) or {"state": "finished"}
    response = render(request, "dataset_status.html", entry=entry, status=status)
    if status.get("state") != "running" and "HX-Request" in request.headers:
        response.headers["HX-Refresh"] = "true"
    return response


@router.get("/datasets/{dataset_id}/samples/{index}.png")
def sample_png(request: Request, dataset_id: str, index: int) -> Response:
    datasets = _index(request)
    entry = datasets.get(dataset_id)
    scan = datasets.read_scan(entry)
    if scan is None:
        raise NotFound(f"data set {dataset_id!r}: not scanned yet (open its page)")
    samples = scan.get("samples") or []
    if not 0 <= index < len(samples):
        raise NotFound(f"sample {index}: the scan of {dataset_id!r} read {len(samples)} samples (0 to "
                       f"{len(samples) - 1})")
    path = user_errors_shown(sample_picture, entry, index, datasets.folder(entry.id), scan["time"], samples[index])
    return FileResponse(path, media_type="image/png", headers={"Cache-Control": "max-age=3600"})


@router.get("/datasets/{dataset_id}/histogram.png")
def histogram_png(request: Request, dataset_id: str) -> Response:
    datasets = _index(request)
    entry = datasets.get(dataset_id)
    scan = datasets.read_scan(entry) or {}
    if not scan.get("histogram"):
        raise NotFound(f"data set {dataset_id!r}: no sizes to draw (no boxes or label maps were read)")
    return FileResponse(datasets.folder(entry.id) / scan["histogram"], media_type="image/png")
