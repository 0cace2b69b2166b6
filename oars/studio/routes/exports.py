"""Exports: export a run's checkpoint (``oars.pipelines.export.export_model``, any format and precision it writes)
into ``<workspace>/exports/<name>``, show its parity (deploy.yaml ``parity:``) and files, "try it" on an uploaded
image or video through ``oars-infer``, and start/stop ``oars-serve`` for it (URL, health, metrics)."""

from __future__ import annotations

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, Response

from oars.studio.background import read_status, start_job
from oars.studio.evaluations import checkpoint_path, checkpoints
from oars.studio.exports import (
    PRECISIONS,
    ServeManager,
    check_name,
    check_upload,
    describe_export,
    existing_export,
    export_dir,
    export_formats,
    list_exports,
    new_try_dir,
    read_try,
    save_upload,
    try_dir,
    try_export,
)
from oars.studio.security import NotFound, StudioError
from oars.studio.web import render, settings, workspace

router = APIRouter()


def _serves(request: Request) -> ServeManager:
    return ServeManager(workspace(request), settings(request).python)


@router.get("/exports")
def exports_page(request: Request) -> Response:
    ws = workspace(request)
    return render(request, "exports.html", exports=list_exports(ws), runs=ws.run_ids())


@router.get("/runs/{run_id}/export")
def export_form(request: Request, run_id: str) -> Response:
    run_dir = workspace(request).run_dir(run_id)
    return render(request, "export_run.html", run_id=run_id, checkpoints=checkpoints(run_dir),
                  formats=export_formats(), precisions=PRECISIONS, default_name=f"{run_id}-onnx")


@router.post("/runs/{run_id}/export")
def start_export(request: Request, run_id: str, checkpoint: str = Form(""), fmt: str = Form("onnx"),
                 precision: str = Form("fp32"), name: str = Form(""), calib_dir: str = Form("")) -> Response:
    """Start exporting the run's ``checkpoint`` into ``exports/<name>`` (303 to the export's page)."""
    ws = workspace(request)
    run_dir = ws.run_dir(run_id)
    names = checkpoints(run_dir)
    if not names:
        raise StudioError(f"run {run_id}: no checkpoint (*.pth) in {run_dir} yet; train first")
    ckpt = checkpoint_path(run_dir, checkpoint or names[0])
    if fmt not in export_formats():
        raise StudioError(f"format {fmt!r}: expected one of {', '.join(export_formats())}")
    if precision not in PRECISIONS:
        raise StudioError(f"precision {precision!r}: expected one of {', '.join(PRECISIONS)}")
    if not (run_dir / "config.yaml").is_file():
        raise StudioError(f"run {run_id}: {run_dir} has no config.yaml to export with")
    folder = export_dir(ws, name or f"{run_id}-{fmt}")
    if (folder / "deploy.yaml").exists():
        raise StudioError(f"export {folder.name}: already exists (exports never replace exports); choose another "
                          "name")
    args = ["export", "--config", str(run_dir / "config.yaml"), "--checkpoint", str(ckpt), "--out-dir",
            str(folder), "--format", fmt, "--precision", precision]
    if precision == "int8":
        if not calib_dir.strip():
            raise StudioError("precision int8: give a calibration folder (images like the deployment data)")
        calib = ws.resolve(calib_dir.strip())
        if not calib.is_dir():
            raise StudioError(f"calibration folder {calib_dir.strip()}: not a folder")
        args += ["--calib-dir", str(calib)]
    start_job(folder, args, settings(request).python)
    return RedirectResponse(f"/exports/{folder.name}", status_code=303)


@router.get("/exports/{name}")
def export_page(request: Request, name: str, try_id: str = "") -> Response:
    ws = workspace(request)
    folder = existing_export(ws, name)
    tried = read_try(try_dir(ws, try_id)) if try_id else None
    return render(request, "export.html", export=describe_export(folder), serve=_serves(request).state(name),
                  tried=tried, max_upload=settings(request).max_upload_bytes)


@router.get("/exports/{name}/status")
def export_status(request: Request, name: str) -> Response:
    """The export job's state (htmx polls it; a finished job reloads the page)."""
    folder = existing_export(workspace(request), name)
    status = read_status(folder) or {"state": "finished"}
    response = render(request, "export_status.html", export={"name": name, "status": status})
    if status.get("state") != "running" and "HX-Request" in request.headers:
        response.headers["HX-Refresh"] = "true"
    return response


@router.post("/exports/{name}/try")
async def try_it(request: Request, name: str, file: UploadFile | None = File(None)) -> Response:
    """Run ``oars-infer`` on the uploaded file (refused above the upload limit or when it does not decode); for a
    model that reads no input (a noise generator), without one."""
    ws = workspace(request)
    folder = existing_export(ws, name)
    facts = describe_export(folder)
    if not facts["deploy"]:
        raise StudioError(f"export {name}: not finished (no deploy.yaml yet)")
    limit = settings(request).max_upload_bytes
    filename = (file.filename if file is not None else "") or "upload"  # a body over the limit: BodyLimit refused it
    data = await file.read(limit + 1) if file is not None else b""
    if not facts["needs_input"] and not data:
        result = try_export(folder, new_try_dir(ws), None, settings(request).python)
    else:
        suffix = check_upload(data, filename, limit)
        try_folder = new_try_dir(ws)
        upload = save_upload(try_folder, data, filename, suffix)
        result = try_export(folder, try_folder, upload, settings(request).python)
    if "application/json" in request.headers.get("accept", ""):
        return JSONResponse(result)
    return RedirectResponse(f"/exports/{name}?try_id={result['id']}", status_code=303)


@router.get("/exports/{name}/try/{try_id}/{filename}")
def try_file(request: Request, name: str, try_id: str, filename: str) -> Response:
    """A picture "try it" wrote (only names the run wrote are served)."""
    ws = workspace(request)
    existing_export(ws, name)
    folder = try_dir(ws, try_id)
    if filename not in read_try(folder)["pictures"]:
        raise NotFound(f"{filename}: not a picture of try {try_id}")
    return FileResponse(folder / "out" / filename)


@router.post("/exports/{name}/serve/start")
def serve_start(request: Request, name: str, port: int = Form(8000)) -> Response:
    _serves(request).start(check_name(name), existing_export(workspace(request), name), port)
    return RedirectResponse(f"/exports/{name}", status_code=303)


@router.post("/exports/{name}/serve/stop")
def serve_stop(request: Request, name: str) -> Response:
    existing_export(workspace(request), name)
    _serves(request).stop(name)
    return RedirectResponse(f"/exports/{name}", status_code=303)


@router.get("/exports/{name}/serve")
def serve_state(request: Request, name: str) -> Response:
    """The server's URL, health and metrics (htmx refreshes it)."""
    existing_export(workspace(request), name)
    return render(request, "export_serve.html", export={"name": name}, serve=_serves(request).state(name))
