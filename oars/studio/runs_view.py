"""What the Runs pages show of a run, assembled from its files (:mod:`oars.studio.run_files`) and its job
(:mod:`oars.studio.jobs`): one row of the runs table (also ``/api/runs``), the live part of a run's page, the
curves JSON and the compare view (curves overlaid, configs diffed).
"""

from __future__ import annotations

import difflib
import shutil
from pathlib import Path

from oars.studio import jobs, run_files
from oars.studio.security import StudioError, resolve_inside
from oars.studio.workspace import Workspace

#: curve groups of a run's page: ``part`` -> which training series (validation metrics are ``val``)
PARTS = ("loss", "lr", "other", "val", "all")


def discover(ws: Workspace) -> None:
    """Index the work dirs under ``runs/`` (:meth:`Workspace.discover_runs`: those the user removed stay out)."""
    ws.discover_runs()


def register(ws: Workspace, raw: str) -> str:
    """Index a work dir made elsewhere (a terminal run): ``raw`` resolved through the workspace's walls.

    Raises:
        StudioError: outside the workspace and data roots, not a folder, or no ``config.yaml`` in it.
    """
    if not (raw or "").strip():
        raise StudioError("work dir: give the folder of a training run (it holds config.yaml)")
    path = ws.resolve(raw.strip())
    if not path.is_dir():
        raise StudioError(f"work dir {raw}: no such folder (resolved to {path})")
    if not (path / "config.yaml").is_file():
        raise StudioError(f"work dir {raw}: no config.yaml in {path}; a training work dir holds the config.yaml "
                          "tools/train.py writes when it starts")
    return ws.register_run(path, run_files.config_name(path))


def remove(ws: Workspace, run_id: str, confirm_name: str = "") -> str:
    """Remove a run from the index; its folder stays unless ``confirm_name`` is the folder's name (then it is
    deleted). Returns what was done, for the page.

    Raises:
        StudioError: the run is running or queued, or ``confirm_name`` is given but is not the folder's name.
    """
    work_dir = ws.run_dir(run_id)
    confirm_name = (confirm_name or "").strip()
    if confirm_name and confirm_name != work_dir.name:
        raise StudioError(f"run {run_id}: to delete its folder type its name exactly ({work_dir.name!r}), got "
                          f"{confirm_name!r}; nothing was removed")
    jobs.forget(ws, run_id)
    ws.unregister_run(run_id)
    if confirm_name:
        shutil.rmtree(work_dir, ignore_errors=True)
        return f"run {run_id} removed from the index and its folder {work_dir} deleted"
    return f"run {run_id} removed from the index; its folder {work_dir} is kept"


def indexed_config(ws: Workspace, run_id: str) -> str | None:
    with ws.connect() as db:
        row = db.execute("SELECT config FROM runs WHERE id = ?", (run_id,)).fetchone()
    return row[0] if row else None


def run_row(ws: Workspace, run_id: str, log_tail: str | None = None) -> dict:
    """One run as the table and ``/api/runs`` show it (``log_tail``: the text log's last 200 lines, when the
    caller read them already)."""
    work_dir = ws.run_dir(run_id)
    config = run_files.read_config(work_dir)
    log = run_files.scalar_log(work_dir)
    if log_tail is None:
        log_tail = run_files.tail(run_files.text_log(work_dir), 200)
    progress = run_files.progress(work_dir, log, config, log_tail)
    status = jobs.run_status(ws, run_id)
    best = run_files.best_metric(log, config)
    started = status.started or _first_log_time(work_dir)
    ended = status.ended or (None if status.live else run_files.log_mtime(work_dir))
    elapsed = ((ended or run_files.now()) - started) if started else None
    name = run_files.config_name(work_dir, indexed_config(ws, run_id))
    return {"id": run_id, "task": config.scope or "", "config": name or "",
            "status": status.state, "message": status.message, "best_metric": best[0] if best else None,
            "best_value": best[1] if best else None, "best": f"{best[0]} {best[1]:.4g}" if best else "",
            "epochs_done": progress.epochs_done, "max_epochs": config.max_epochs,
            "progress": progress.text(eta=status.live),
            "done": progress.done, "total": progress.total, "eta": progress.eta,
            "time_s": round(elapsed, 1) if elapsed is not None else None, "time": run_files.age_text(elapsed),
            "work_dir": str(work_dir)}


def _first_log_time(work_dir: Path) -> float | None:
    stamps = sorted(p.stat().st_mtime for p in Path(work_dir).glob("*/vis_data") if p.is_dir())
    if stamps:
        return stamps[0]
    try:
        return (Path(work_dir) / "config.yaml").stat().st_mtime
    except OSError:
        return None


def live_view(ws: Workspace, run_id: str) -> dict:
    """The live part of a run's page: status, progress, the log tail (also what each server-sent event carries)."""
    work_dir = ws.run_dir(run_id)
    log_tail = run_files.tail(run_files.text_log(work_dir), 200)  # read once: the progress line and the tail shown
    row = run_row(ws, run_id, log_tail)
    row["log_tail"] = "\n".join(log_tail.splitlines()[-16:])
    row["live"] = row["status"] in ("queued", "running")
    row["percent"] = round(100 * row["done"] / row["total"], 1) if row["total"] else None
    row["checkpoint"] = run_files.last_checkpoint(work_dir)
    return row


def curves_json(ws: Workspace, run_id: str, part: str = "loss") -> dict:
    """``{x, x_label, series}`` of one group of a run's curves (``loss``, ``lr``, ``other``, ``val``, ``all``).

    Raises:
        StudioError: an unknown ``part``.
    """
    if part not in PARTS:
        raise StudioError(f"part {part!r}: expected one of {', '.join(PARTS)}")
    return _part(run_files.curves(run_files.scalar_log(ws.run_dir(run_id))), part)


def _part(data: dict, part: str) -> dict:
    """One group of :func:`run_files.curves`' output (the page's four plots each draw one)."""
    if part == "val":
        return data["val"]
    series = data["series"]
    if part == "loss":
        series = {k: v for k, v in series.items() if "loss" in k}
    elif part == "lr":
        series = {k: v for k, v in series.items() if k == "lr" or k.endswith(".lr") or k.endswith("_lr")}
    elif part == "other":
        series = {k: v for k, v in series.items() if "loss" not in k and k != "lr" and not k.endswith("lr")}
    return {"x": data["x"], "x_label": data["x_label"], "series": series}


def new_points(ws: Workspace, run_id: str, drawn: tuple[int, int]) -> tuple[dict, tuple[int, int]]:
    """The curve points a live page has not drawn yet, per plot: ``{"loss"|"lr"|"other"|"val": {x, series}}``,
    and the new counts of drawn (training, validation) lines. A page's event carries these instead of the page
    fetching every series again after each event.

    Args:
        drawn: how many training and validation lines the page drew (counts that shrank, a log rewritten, start
            again from 0: the page drops points at or before the last x it has).
    """
    log = run_files.scalar_log(ws.run_dir(run_id))
    if log is None:
        return {}, (0, 0)
    train_from, val_from = drawn
    if train_from > len(log.train) or val_from > len(log.val):
        train_from = val_from = 0
    data = run_files.curves(log, train_from, val_from)
    points = {part: _part(data, part) for part in ("loss", "lr", "other", "val")}
    return points, (len(log.train), len(log.val))


def drawn_counts(ws: Workspace, run_id: str) -> tuple[int, int]:
    """How many training and validation lines the run has logged (what a page rendered now draws)."""
    log = run_files.scalar_log(ws.run_dir(run_id))
    return (len(log.train), len(log.val)) if log else (0, 0)


def compare_keys(ws: Workspace, run_ids: list[str]) -> list[str]:
    """The scalar keys every compared run logged (what the compare view can overlay)."""
    keys: set[str] | None = None
    for run_id in run_ids:
        log = run_files.scalar_log(ws.run_dir(run_id))
        found = set(log.keys()) if log else set()
        keys = found if keys is None else keys & found
    return sorted((keys or set()) - {"time", "data_time", "samples_per_s"})


def compare_curves(ws: Workspace, run_ids: list[str], key: str) -> dict:
    """One scalar of several runs overlaid: ``{x, x_label, series: {run_id: [...]}}`` on the union of their x
    (gaps where a run has no value), read with the same reader as ``analyze_logs plot_curve``."""
    points: dict[str, dict[float, float]] = {}
    label = "iteration"
    for run_id in run_ids:
        log = run_files.scalar_log(ws.run_dir(run_id))
        if log is None:
            points[run_id] = {}
            continue
        xs, ys, label = log.series(key)
        points[run_id] = dict(zip(xs.tolist(), ys.tolist()))
    x = sorted({v for p in points.values() for v in p})
    return {"x": x, "x_label": label, "series": {r: [p.get(v) for v in x] for r, p in points.items()}}


def config_diffs(ws: Workspace, run_ids: list[str]) -> list[dict]:
    """The resolved configs (``config.yaml``) of the runs after the first, each diffed against the first's."""
    texts = {r: run_files.read_config(ws.run_dir(r)).text for r in run_ids}
    first = run_ids[0]
    out = []
    for other in run_ids[1:]:
        lines = list(difflib.unified_diff(texts[first].splitlines(), texts[other].splitlines(),
                                          fromfile=f"{first}/config.yaml", tofile=f"{other}/config.yaml", lineterm="",
                                          n=2))
        out.append({"a": first, "b": other, "lines": [_diff_line(line) for line in lines]})
    return out


def _diff_line(line: str) -> tuple[str, str]:
    if line.startswith(("@@", "---", "+++")):
        return "hunk", line
    kind = "add" if line.startswith("+") else "del" if line.startswith("-") else "same"
    return kind, line


def report_file(ws: Workspace, run_id: str) -> Path | None:
    """The run's ``report.html`` (resolved inside its work dir), or None when it has none."""
    work_dir = ws.run_dir(run_id)
    path = resolve_inside("report.html", [work_dir], work_dir)
    return path if path.is_file() else None
