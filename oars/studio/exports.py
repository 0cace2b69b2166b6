"""The Exports room's files and processes: export folders under ``<workspace>/exports/<name>/`` (written by
:func:`oars.pipelines.export.export_model` in a background job), their parity and files, "try it" (an upload run
through ``oars-infer`` itself: ``python -m oars_deploy.cli`` with an argument list, the one code path of the
runtime plug-ins), and ``oars-serve`` processes for an export.

Uploads are bounded by ``settings.max_upload_bytes`` and decoded before anything runs on them: images as the
server decodes a request body (header size checked before any decode, then OpenCV ``imdecode``), videos opened
with PyAV and one frame decoded. Feature files are refused: a pickle runs code when it is read.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from oars.studio.background import read_status
from oars.studio.security import NotFound, StudioError
from oars.studio.workspace import Workspace

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
PRECISIONS = ("fp32", "fp16", "int8")
PICTURE_SUFFIXES = (".png", ".jpg", ".jpeg", ".mp4")
DEPLOY_FILE = "deploy.yaml"
INFER_TIMEOUT_S = 300
SERVE_MODULE = "oars_deploy.serve.cli"
_SERVES = ("CREATE TABLE IF NOT EXISTS serves (export TEXT PRIMARY KEY, pid INTEGER NOT NULL, port INTEGER NOT NULL, "
           "started REAL NOT NULL)")


class UploadTooLarge(StudioError):
    """An upload over ``settings.max_upload_bytes``."""

    status = 413


def upload_limit_message(filename: str, size: int, limit: int, what: str = "") -> str:
    """The one refusal of an upload over the limit (naming the file, its size and the limit)."""
    return (f"{filename}: {what or 'the file is'} {size} bytes, over this studio's upload limit of {limit} bytes "
            f"({limit / 2**20:.1f} MiB; oars-studio's max_upload_bytes)")


def export_formats() -> tuple[str, ...]:
    """Every ``--format`` the export pipeline writes (``onnx``, ``tensorrt`` and the edge formats)."""
    from oars.pipelines.export import FORMATS

    return tuple(FORMATS)


def check_name(name: str, what: str = "export name") -> str:
    """A folder name made of letters, digits, ``_ . -`` (so a name can never leave its folder).

    Raises:
        StudioError: naming the value and what is allowed.
    """
    name = (name or "").strip()
    if not _NAME.match(name):
        raise StudioError(f"{what} {name!r}: expected 1-100 letters, digits, '_', '.' or '-', starting with a letter "
                          "or digit")
    return name


def export_dir(workspace: Workspace, name: str) -> Path:
    """The folder of export ``name`` (it need not exist yet)."""
    return workspace.exports_dir / check_name(name)


def existing_export(workspace: Workspace, name: str) -> Path:
    """The folder of an export that exists (raises ``NotFound`` naming it)."""
    folder = export_dir(workspace, name)
    if not folder.is_dir():
        raise NotFound(f"export {name!r}: no such folder in {workspace.exports_dir} (see the Exports page)")
    return folder


def read_deploy(folder: Path) -> dict | None:
    """The export's deploy.yaml as a dict, or None (not written yet / unreadable)."""
    import yaml

    try:
        data = yaml.safe_load((folder / DEPLOY_FILE).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    return data if isinstance(data, dict) else None


def describe_export(folder: Path) -> dict:
    """What the pages show of an export: name, job status, deploy.yaml facts (predictor, format, precision,
    ``parity``) and its files with sizes."""
    deploy = read_deploy(folder) or {}
    model = deploy.get("model") or {}
    status = read_status(folder) or ({"state": "finished"} if deploy else {"state": "unknown"})
    files = sorted((p.name, p.stat().st_size) for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
    return {"name": folder.name, "status": status, "deploy": bool(deploy), "predictor": deploy.get("predictor"),
            "needs_input": needs_input(folder, deploy) if deploy else True,
            "format": model.get("format", "onnx"), "backend": model.get("backend"),
            "precision": model.get("precision", "fp32"), "parity": deploy.get("parity"),
            "try_backend": try_backend(model) if deploy else None,
            "labels": list(deploy.get("labels") or []), "files": files}


def needs_input(folder: Path, deploy: dict) -> bool:
    """Whether the export's runtime plug-in reads an input (a noise generator reads none: "try it" generates)."""
    from oars_deploy.errors import DeployError
    from oars_deploy.plugins import predictor_for

    try:
        return bool(predictor_for(deploy, str(folder / DEPLOY_FILE)).needs_input)
    except DeployError:
        return True


def list_exports(workspace: Workspace) -> list[dict]:
    """Every export folder of the workspace, newest first."""
    folders = [p for p in workspace.exports_dir.iterdir() if p.is_dir() and _NAME.match(p.name)]
    return [describe_export(p) for p in sorted(folders, key=lambda p: p.stat().st_mtime, reverse=True)]


# ------------------------------------------------------------------------------------------------------- try it
def check_upload(data: bytes, filename: str, limit: int) -> str:
    """Refuse an upload that is too big or does not decode; returns its suffix.

    Raises:
        StudioError: over ``limit`` bytes (naming the limit), an unknown kind of file, or one that does not decode.
    """
    from oars_deploy.suffixes import IMAGE_SUFFIXES, VIDEO_SUFFIXES

    if len(data) > limit:
        raise UploadTooLarge(upload_limit_message(filename, len(data), limit))
    if not data:
        raise StudioError(f"{filename or 'the upload'}: empty; choose an image or a video file")
    suffix = Path(filename or "").suffix.lower()
    if suffix in IMAGE_SUFFIXES:
        from oars_deploy.image_limits import MAX_FILE_PIXELS
        from oars_deploy.serve.requests import RequestError, decode_image

        try:
            decode_image(data, filename, MAX_FILE_PIXELS)
        except RequestError as err:
            raise StudioError(str(getattr(err, "message", err))) from None
        return suffix
    if suffix in VIDEO_SUFFIXES:
        _check_video(data, filename)
        return suffix
    raise StudioError(f"{filename}: expected an image ({', '.join(IMAGE_SUFFIXES)}) or a video "
                      f"({', '.join(VIDEO_SUFFIXES)}); other files are not taken by the studio")


def _check_video(data: bytes, filename: str) -> None:
    import io

    try:
        import av
    except ImportError:
        raise StudioError(f"{filename}: videos need PyAV (pip install av)") from None
    try:
        with av.open(io.BytesIO(data)) as container:
            if not container.streams.video:
                raise StudioError(f"{filename}: holds no video stream")
            next(container.decode(video=0))
    except StudioError:
        raise
    except Exception as err:  # noqa: BLE001 - PyAV's errors vary by container; all mean "not a usable video"
        raise StudioError(f"{filename}: could not decode it as a video ({type(err).__name__})") from None


def save_upload(folder: Path, data: bytes, filename: str, suffix: str) -> Path:
    """Keep an upload in its try folder as ``<stem><suffix>``: the stem reduced to letters, digits, ``_`` and ``-``
    (the user's name is a label, never a path)."""
    stem = re.sub(r"[^A-Za-z0-9_-]+", "_", Path(filename).stem)[:60].strip("_") or "input"
    path = folder / f"{stem}{suffix}"
    path.write_bytes(data)
    return path


def infer_command(folder: Path, input_path: Path | None, out_dir: Path, python: str | None = None) -> list[str]:
    """The ``oars-infer`` command line of "try it" (the export's own backend for an edge format; no ``-i`` for a
    model that reads no input)."""
    from oars_deploy.backends import BACKENDS

    args = [python or sys.executable, "-m", "oars_deploy.cli", "--model-dir", str(folder), "-o", str(out_dir)]
    if input_path is not None:
        args += ["-i", str(input_path)]
    backend = try_backend((read_deploy(folder) or {}).get("model") or {})
    if backend in BACKENDS and backend != "onnxruntime":
        args += ["--backend", backend]
    return args


def try_backend(model: dict) -> str | None:
    """The ``oars-infer --backend`` that runs an export's own files: its edge format's (``ort`` for model.ort,
    ``openvino`` for model.xml, ...), else deploy.yaml's ``model.backend``."""
    from oars.export.formats import FORMATS

    writer = FORMATS.get(str(model.get("format")))
    return writer.infer_backend if writer is not None else model.get("backend")


def new_try_dir(workspace: Workspace) -> Path:
    """A fresh folder for one "try it" run under ``uploads/`` (its name made here, never from the request)."""
    folder = workspace.uploads_dir / uuid.uuid4().hex[:12]
    folder.mkdir(parents=True)
    return folder


def try_export(folder: Path, try_folder: Path, upload: Path | None, python: str | None = None) -> dict:
    """Run ``oars-infer`` on ``upload`` (None: a model that reads no input) with the export in ``folder``, writing
    into ``try_folder/out``; returns ``{"id", "records", "pictures", "input"}``.

    Raises:
        StudioError: oars-infer's own one-line message when it fails.
    """
    out_dir = try_folder / "out"
    proc = subprocess.run(infer_command(folder, upload, out_dir, python), capture_output=True, text=True,
                          timeout=INFER_TIMEOUT_S, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        message = next((line[len("error: "):] for line in reversed(lines) if line.startswith("error: ")),
                       lines[-1] if lines else f"exit status {proc.returncode}")
        raise StudioError(f"oars-infer: {message}")
    return read_try(try_folder)


def read_try(try_dir: Path) -> dict:
    """A "try it" result: the records of results.jsonl and the pictures oars-infer wrote."""
    out_dir = try_dir / "out"
    records = []
    results = out_dir / "results.jsonl"
    if results.is_file():
        records = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines() if line.strip()]
    made = sorted(p.name for p in out_dir.glob("*") if p.is_file() and p.suffix.lower() in PICTURE_SUFFIXES)
    drawn = [n for n in made if Path(n).stem.endswith("_vis")]  # the drawn result beside a raw label map
    pictures = drawn or made
    inputs = [p.name for p in try_dir.iterdir() if p.is_file()]
    return {"id": try_dir.name, "records": records, "pictures": pictures, "input": inputs[0] if inputs else None}


def try_dir(workspace: Workspace, try_id: str) -> Path:
    """The folder of a "try it" run (raises ``NotFound``)."""
    folder = workspace.uploads_dir / check_name(try_id, "try id")
    if not (folder / "out").is_dir():
        raise NotFound(f"try {try_id!r}: no such result")
    return folder


# -------------------------------------------------------------------------------------------------------- serve
class ServeManager:
    """``oars-serve`` processes for exports: one per export, on a loopback port, state in table ``serves``."""

    def __init__(self, workspace: Workspace, python: str | None = None) -> None:
        self.workspace = workspace
        self.python = python or sys.executable
        workspace.ensure_table(_SERVES)

    def require_extra(self) -> None:
        """Refuse when the serve extra (Ray Serve) is missing, naming the pip command."""
        from oars_deploy.extras import check_extra
        from oars_deploy.serve.cli import SERVE_MODULES

        check_extra(SERVE_MODULES, "serving an export (oars-serve)", error=StudioError)

    def start(self, name: str, folder: Path, port: int) -> dict:
        """Start ``oars-serve --model-dir FOLDER --port PORT`` on 127.0.0.1 in its own session.

        Raises:
            StudioError: no deploy.yaml, the serve extra is missing, a server already runs, or a bad port.
        """
        if not (folder / DEPLOY_FILE).is_file():
            raise StudioError(f"export {name}: no {DEPLOY_FILE} yet (wait for the export to finish)")
        if not 1024 <= port <= 65535:
            raise StudioError(f"port {port}: expected 1024-65535")
        self.require_extra()
        if self.state(name)["running"]:
            raise StudioError(f"export {name}: oars-serve already runs for it (stop it first)")
        log = open(folder.parent / f".{name}.serve.log", "wb")  # noqa: SIM115 - handed to the child
        try:
            proc = subprocess.Popen([self.python, "-m", SERVE_MODULE, "--model-dir", str(folder), "--host",
                                     "127.0.0.1", "--port", str(port)], stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            log.close()
        import threading

        threading.Thread(target=proc.wait, daemon=True).start()
        with self.workspace.connect() as db:
            db.execute("INSERT OR REPLACE INTO serves (export, pid, port, started) VALUES (?, ?, ?, ?)",
                       (name, proc.pid, port, time.time()))
        return self.state(name)

    def _row(self, name: str) -> tuple[int, int, float] | None:
        with self.workspace.connect() as db:
            return db.execute("SELECT pid, port, started FROM serves WHERE export = ?", (name,)).fetchone()

    def state(self, name: str) -> dict:
        """``{"running", "url", "health", "metrics", "pid", "port"}`` of the export's server (health and metrics
        asked over HTTP with a one-second timeout)."""
        row = self._row(name)
        if row is None or not _is_serve_process(row[0]):
            return {"running": False, "url": None, "health": None, "metrics": None}
        pid, port, _ = row
        url = f"http://127.0.0.1:{port}"
        return {"running": True, "pid": pid, "port": port, "url": url, "health": _get(url + "/health"),
                "metrics": _get(url + "/metrics")}

    def stop(self, name: str, timeout: float = 60.0) -> None:
        """Stop the export's server as Ctrl-C does (SIGINT to its process group: it shuts its Ray instance down),
        then SIGTERM if it is still there after ``timeout``.

        Raises:
            StudioError: no server runs for the export.
        """
        row = self._row(name)
        if row is None or not _is_serve_process(row[0]):
            raise StudioError(f"export {name}: no oars-serve runs for it")
        pid = row[0]
        os.killpg(pid, signal.SIGINT)
        deadline = time.monotonic() + timeout
        while _is_serve_process(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _is_serve_process(pid):
            os.killpg(pid, signal.SIGTERM)
        with self.workspace.connect() as db:
            db.execute("DELETE FROM serves WHERE export = ?", (name,))


def _is_serve_process(pid: int) -> bool:
    """Whether ``pid`` is a live ``oars-serve`` (its command line names the module: a reused pid is not it)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\x00")
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return False
    return SERVE_MODULE.encode() in cmdline and stat.split(")")[-1].split()[0] != "Z"


def _get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=1.0) as response:  # noqa: S310 - a loopback URL the studio made
            return response.read(4000).decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, ValueError):
        return None
