"""Train: pick a config from the catalogue, change the common settings in a form or the YAML itself (checked as
you type with the config checker's messages), and launch it as a job (:mod:`oars.studio.jobs`).
"""

from __future__ import annotations

import time
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from oars.studio import configs, jobs
from oars.studio.security import StudioError
from oars.studio.web import render, settings, workspace
from oars.studio.workspace import Workspace

router = APIRouter()


@router.get("/train")
def train_page(request: Request, config: str = "") -> Response:
    """The catalogue; with ``?config=NAME`` that config's launch form (its settings, its YAML, its size)."""
    ws = workspace(request)
    jobs.schedule(ws, settings(request))
    entries = configs.catalogue()
    chosen = None
    if config:
        path = configs.resolve_config(ws, config)
        chosen = {"name": config, "path": str(path), "text": path.read_text(encoding="utf-8"),
                  "defaults": configs.config_values(path)}
    return render(request, "train.html", groups=configs.grouped(entries), sizes=configs.cached_sizes(ws),
                  chosen=chosen, count=len(entries))


@router.get("/train/size")
def config_size(request: Request, config: str) -> HTMLResponse:
    """``N parameters · F FLOPs`` of a config's full-size model (fetched by the page after it renders; measured
    once and kept in the index)."""
    from oars.analysis.flops import human

    measured = configs.size(workspace(request), configs.resolve_config(workspace(request), config))
    if measured["problem"]:
        return HTMLResponse(f'<span class="muted" title="{_esc(measured["problem"])}">size not measured: '
                            f'{_esc(measured["problem"][:120])}</span>')
    return HTMLResponse(f'<span id="size">{human(measured["params"])} parameters · '
                        f'{human(measured["flops"])}FLOPs</span>')


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


async def _form(request: Request) -> dict[str, str]:
    form = await request.form()
    return {k: v for k, v in form.items() if isinstance(v, str)}


def form_overrides(ws: Workspace, form: dict[str, str], values: dict) -> list[str]:
    """The ``-o`` overrides the form asks for: each field that differs from the config's value, then the extra
    ``key=value`` lines.

    Raises:
        StudioError: a field that is not a number where one is expected, or an extra line without ``=``.
    """
    out = []
    key = "train_cfg.max_epochs" if values["by_epoch"] else "train_cfg.max_iters"
    for field, target, kind in (("length", key, int), ("batch_size", "train_dataloader.batch_size", int),
                                ("lr", "optim_wrapper.optimizer.lr", float)):
        raw = form.get(field, "").strip()
        if not raw:
            continue
        try:
            value = kind(raw)
        except ValueError:
            expected = "an integer" if kind is int else "a number"
            raise StudioError(f"{field.replace('_', ' ')} {raw!r}: expected {expected}") from None
        if value <= 0:
            raise StudioError(f"{field.replace('_', ' ')} {raw}: expected a value above 0")
        if value != values.get(field):
            out.append(f"{target}={value}")
    load_from = form.get("load_from", "").strip()
    if load_from and load_from != (values.get("load_from") or ""):
        if "://" not in load_from:  # a local file: inside the workspace or a data root
            load_from = str(ws.resolve(load_from))
        out.append(f"load_from={load_from}")
    for n, line in enumerate(form.get("extra", "").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "=" not in line:
            raise StudioError(f"more overrides, line {n}: {line!r}: expected key=value (e.g. "
                              "train_dataloader.num_workers=0)")
        out.append(line)
    return out


def _edited(form: dict[str, str], original: Path) -> str | None:
    """The editor's text when the user changed it (line endings aside), else None."""
    text = form.get("yaml", "")
    if not text.strip():
        return None
    norm = text.replace("\r\n", "\n").strip()
    return None if norm == original.read_text(encoding="utf-8").replace("\r\n", "\n").strip() else norm + "\n"


@router.post("/train/check")
async def check(request: Request) -> HTMLResponse:
    """The config checker's messages for the form as it stands (the YAML editor and the overrides), each with its
    did-you-mean; ``OK`` when there is nothing to say."""
    ws = workspace(request)
    form = await _form(request)
    original = configs.resolve_config(ws, form.get("config", ""))
    try:
        overrides = form_overrides(ws, form, configs.config_values(original))
    except StudioError as err:
        return _check_html([str(err)])
    edited = _edited(form, original)
    problems = (configs.checked_with_edit(edited, original, overrides) if edited is not None
                else configs.check_problems(original, overrides))
    return _check_html(problems)


def _check_html(problems: list[str]) -> HTMLResponse:
    if not problems:
        return HTMLResponse('<p class="ok" id="check-ok">Config OK: the checker finds no problem.</p>')
    items = "".join(f"<li>{_esc(p)}</li>" for p in problems)
    return HTMLResponse(f'<div class="error" role="alert"><p>{len(problems)} problem{"s" if len(problems) > 1 else ""}'
                        f' in the config:</p><ul class="problems">{items}</ul></div>')


@router.post("/train/launch")
async def launch(request: Request) -> Response:
    """Check the config with the form's changes, make the run's work dir under ``runs/`` and queue its job (it
    starts at once when no other run holds the slot). Redirects to the run's page."""
    ws = workspace(request)
    studio = settings(request)
    form = await _form(request)
    original = configs.resolve_config(ws, form.get("config", ""))
    overrides = form_overrides(ws, form, configs.config_values(original))
    edited = _edited(form, original)
    problems = (configs.checked_with_edit(edited, original, overrides) if edited is not None
                else configs.check_problems(original, overrides))
    if problems:
        raise StudioError(f"{original.name}: not launched: " + (problems[0] if len(problems) == 1 else
                                                                 f"{len(problems)} problems: " + "; ".join(problems)))
    work_dir = _new_work_dir(ws, original.stem)
    config = configs.edited_copy(edited, original, work_dir / "studio_edit") if edited is not None else original
    run_id = ws.register_run(work_dir, form.get("config", "").strip() or original.stem)
    cmd = jobs.job_command(studio, str(config), work_dir, overrides, amp=form.get("amp") == "on",
                           compile=form.get("compile") == "on")
    jobs.enqueue(ws, studio, run_id, cmd)
    return RedirectResponse(f"/runs/{run_id}", status_code=303)


def _new_work_dir(ws: Workspace, stem: str) -> Path:
    """``runs/<config>_<date>_<time>`` (a suffix when two launches share the second)."""
    base = ws.runs_dir / f"{stem}_{time.strftime('%Y%m%d_%H%M%S')}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}_{n}")
    path.mkdir(parents=True)
    return path
