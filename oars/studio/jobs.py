"""Training jobs the studio launches: a queue in the index, one subprocess per job, stop (Ctrl-C) and resume, and a
run's status read back after a studio restart.

A job is ``python -m oars.studio.train_job --config C --work-dir W [-o k=v ...]`` started with an argument list
(no shell) and ``start_new_session=True``: it is its own process group, not part of the studio's, so stopping or
restarting the studio leaves it training. Its pid, command, start time, work dir and log file are kept in the
``train_jobs`` table; at its end the job writes ``studio_job.json`` (exit code, one-line message) into its work dir.

Status of a run (:func:`run_status`): ``queued`` (waiting for a slot), ``running`` (its process is alive: the pid
answers ``os.kill(pid, 0)`` and ``/proc/<pid>/cmdline`` is this job's command, started when it was recorded),
``finished`` / ``stopped`` / ``failed`` (from ``studio_job.json``: exit 0, 130 = Ctrl-C, anything else with the
tool's one-line message). A run started in a terminal has no job: running while its log grows, finished when its
loop is complete, else stopped.

The queue: at most ``settings.max_concurrent_runs`` jobs run at once; the others wait as ``queued`` and are
started by :func:`schedule`, which every Runs / run / Train page load and every tick of a live run page (once a
second) calls. There is no scheduler thread: with no studio page open, a queued job starts on the next page load.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from oars.studio import run_files
from oars.studio.background import pid_alive
from oars.studio.security import StudioError
from oars.studio.settings import StudioSettings
from oars.studio.workspace import Workspace

_TABLE = ("CREATE TABLE IF NOT EXISTS train_jobs (run_id TEXT PRIMARY KEY, state TEXT NOT NULL, pid INTEGER, "
          "cmd TEXT NOT NULL, queued REAL NOT NULL, started REAL, work_dir TEXT NOT NULL, log_file TEXT NOT NULL, "
          "stop_requested INTEGER NOT NULL DEFAULT 0)")
JOB_MODULE = "oars.studio.train_job"
_START_TOLERANCE_S = 30.0  # the recorded start time vs the process's own (the kernel's) start time
_lock = threading.Lock()  # one scheduler at a time in this process (SQLite serialises the rest)


@dataclass
class RunStatus:
    """A run's state for the pages: ``state`` (queued, running, finished, failed, stopped) and, when it failed or
    stopped, the one-line message (the tool's own ``error: ...`` line)."""

    state: str
    message: str = ""
    pid: int | None = None
    started: float | None = None
    ended: float | None = None

    @property
    def live(self) -> bool:
        return self.state in ("queued", "running")


def ensure_tables(ws: Workspace) -> None:
    """The ``train_jobs`` table (this room owns it)."""
    ws.ensure_table(_TABLE)


def job_command(settings: StudioSettings, config: str, work_dir: Path, overrides: list[str], *,
                resume: bool = False, amp: bool = False, compile: bool = False) -> list[str]:
    """The job's argument list: ``python -m oars.studio.train_job ...`` (values stay separate arguments; nothing
    reaches a shell)."""
    cmd = [settings.python or sys.executable, "-m", JOB_MODULE, "--config", str(config), "--work-dir", str(work_dir)]
    if resume:
        cmd.append("--resume")
    if amp:
        cmd.append("--amp")
    if compile:
        cmd.append("--compile")
    if overrides:
        cmd += ["-o", *overrides]
    return cmd


def enqueue(ws: Workspace, settings: StudioSettings, run_id: str, cmd: list[str]) -> RunStatus:
    """Queue a job for run ``run_id`` (replacing the record of its previous job) and start it if a slot is free."""
    ensure_tables(ws)
    work_dir = ws.run_dir(run_id)
    work_dir.mkdir(parents=True, exist_ok=True)
    (work_dir / run_files.JOB_FILE).unlink(missing_ok=True)  # the previous job's end record (the studio's own file)
    with ws.connect() as db:
        db.execute("INSERT OR REPLACE INTO train_jobs (run_id, state, pid, cmd, queued, started, work_dir, log_file, "
                   "stop_requested) VALUES (?, 'queued', NULL, ?, ?, NULL, ?, ?, 0)",
                   (run_id, json.dumps(cmd), time.time(), str(work_dir), str(work_dir / run_files.JOB_LOG)))
    schedule(ws, settings)
    return run_status(ws, run_id)


def schedule(ws: Workspace, settings: StudioSettings) -> list[str]:
    """Start queued jobs (oldest first) while fewer than ``settings.max_concurrent_runs`` run; returns the ids
    started. Called on page loads and live-page ticks (see the module's docstring)."""
    ensure_tables(ws)
    started = []
    with _lock:
        rows = _rows(ws)
        running = sum(1 for r in rows if r["state"] == "running" and _job_alive(r))
        for row in sorted((r for r in rows if r["state"] == "queued"), key=lambda r: r["queued"]):
            if running >= max(1, settings.max_concurrent_runs):
                break
            _start(ws, row)
            started.append(row["run_id"])
            running += 1
    return started


def _start(ws: Workspace, row: dict) -> None:
    cmd = json.loads(row["cmd"])
    log = open(row["log_file"], "ab")  # noqa: SIM115 - handed to the child, closed below
    env = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"), PYTHONUNBUFFERED="1")
    started = time.time()
    try:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
    except OSError as err:
        _write_end(Path(row["work_dir"]), 1, f"cannot start the training job: {err}")
        with ws.connect() as db:
            db.execute("UPDATE train_jobs SET state = 'ended', started = ? WHERE run_id = ?", (started, row["run_id"]))
        return
    finally:
        log.close()
    threading.Thread(target=proc.wait, daemon=True).start()  # reap it (no zombie); its end is in studio_job.json
    with ws.connect() as db:
        db.execute("UPDATE train_jobs SET state = 'running', pid = ?, started = ? WHERE run_id = ?",
                   (proc.pid, started, row["run_id"]))


def _write_end(work_dir: Path, code: int, message: str) -> None:
    from oars_deploy.atomic import atomic_write

    atomic_write(str(work_dir / run_files.JOB_FILE),
                 json.dumps({"exit_code": code, "message": message, "ended": time.time()}))


def _rows(ws: Workspace, run_id: str | None = None) -> list[dict]:
    with ws.connect() as db:
        db.row_factory = sqlite3.Row
        if run_id is None:
            return [dict(r) for r in db.execute("SELECT * FROM train_jobs")]
        return [dict(r) for r in db.execute("SELECT * FROM train_jobs WHERE run_id = ?", (run_id,))]


def job_record(ws: Workspace, run_id: str) -> dict | None:
    """The ``train_jobs`` row of run ``run_id`` (its last job), or None for a run the studio never launched."""
    ensure_tables(ws)
    rows = _rows(ws, run_id)
    return rows[0] if rows else None


def _job_alive(row: dict) -> bool:
    """Whether the job's process still runs: the pid answers, is not a zombie, and is this job (its command line
    names the job module and the work dir, and it started when the job was recorded)."""
    pid = row.get("pid")
    if not pid_alive(pid):
        return False
    proc = Path(f"/proc/{pid}")
    if not proc.is_dir():  # no /proc (not Linux): the pid answering is all we can tell
        return True
    try:
        cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        stat = (proc / "stat").read_text(encoding="ascii").rsplit(")", 1)[-1].split()
    except OSError:
        return False
    if stat[0] == "Z" or JOB_MODULE.encode() not in cmdline or row["work_dir"].encode() not in cmdline:
        return False
    started = _process_start_time(int(stat[19]))
    return started is None or row.get("started") is None or abs(started - row["started"]) < _START_TOLERANCE_S


def _process_start_time(ticks: int) -> float | None:
    """A process's start as a Unix time (``/proc/<pid>/stat`` field 22: clock ticks after boot)."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            boot = next(float(line.split()[1]) for line in f if line.startswith("btime"))
    except (OSError, StopIteration, ValueError):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def run_status(ws: Workspace, run_id: str) -> RunStatus:
    """The run's state, from its job record and its work dir (see the module's docstring)."""
    row = job_record(ws, run_id)
    work_dir = ws.run_dir(run_id)
    if row is not None:
        if row["state"] == "queued":
            return RunStatus("queued")
        if row["state"] == "cancelled":
            return RunStatus("stopped", "taken off the queue before it started")
        end = run_files.read_job(work_dir)
        if row["state"] == "running" and end is None and _job_alive(row):
            return RunStatus("running", pid=row["pid"], started=row["started"])
        if end is None:
            return RunStatus("failed", f"the training job ended without writing its result (see "
                                       f"{run_files.JOB_LOG} in {work_dir})", started=row["started"])
        code, message = end.get("exit_code"), str(end.get("message") or "")
        state = "finished" if code == 0 else "stopped" if code == 130 else "failed"
        return RunStatus(state, "" if code == 0 else message, started=row["started"], ended=end.get("ended"))
    return _terminal_status(work_dir)


def _terminal_status(work_dir: Path) -> RunStatus:
    """A run the studio did not launch: running while its logs change, finished when its loop is complete."""
    config = run_files.read_config(work_dir)
    log = run_files.scalar_log(work_dir)
    progress = run_files.progress(work_dir, log, config, run_files.tail(run_files.text_log(work_dir), 200))
    if progress.total and progress.done >= progress.total:
        return RunStatus("finished")
    changed = run_files.log_mtime(work_dir)
    if changed is not None and time.time() - changed < run_files.TERMINAL_RUN_FRESH_S:
        return RunStatus("running")
    return RunStatus("stopped", "" if progress.done else "no training iteration logged")


def stop(ws: Workspace, settings: StudioSettings, run_id: str) -> RunStatus:
    """Stop run ``run_id``: Ctrl-C (SIGINT) to its job's process group, so the pipeline keeps the last checkpoint
    and exits 130 ("stopped"); a queued job is taken off the queue.

    Raises:
        StudioError: the run is not running (naming its state), or the studio did not launch it.
    """
    status = run_status(ws, run_id)
    row = job_record(ws, run_id)
    if status.state == "queued" and row is not None:
        with ws.connect() as db:
            db.execute("UPDATE train_jobs SET state = 'cancelled' WHERE run_id = ?", (run_id,))
        return run_status(ws, run_id)
    if status.state != "running":
        raise StudioError(f"run {run_id}: not running (it is {status.state}); only a running or queued run can be "
                          "stopped")
    if row is None:
        raise StudioError(f"run {run_id}: started outside the studio (in a terminal); stop it there with Ctrl-C")
    try:
        os.killpg(row["pid"], signal.SIGINT)
    except ProcessLookupError:
        pass  # it ended meanwhile: its record says how
    with ws.connect() as db:
        db.execute("UPDATE train_jobs SET stop_requested = 1 WHERE run_id = ?", (run_id,))
    return run_status(ws, run_id)


def resume(ws: Workspace, settings: StudioSettings, run_id: str) -> RunStatus:
    """Continue a stopped or failed run from its last checkpoint, in the same work dir (``--resume``).

    Raises:
        StudioError: the run is running, queued or finished, or has no checkpoint to continue from.
    """
    status = run_status(ws, run_id)
    if status.state in ("running", "queued", "finished"):
        raise StudioError(f"run {run_id}: it is {status.state}; only a stopped or failed run can be resumed")
    work_dir = ws.run_dir(run_id)
    if run_files.last_checkpoint(work_dir) is None:
        raise StudioError(f"run {run_id}: no checkpoint in {work_dir} to resume from (it stopped before the first "
                          "was saved); launch it again from the Train page")
    row = job_record(ws, run_id)
    if row is not None:
        cmd = [c for c in json.loads(row["cmd"]) if c != "--resume"]
        cmd.insert(cmd.index("--work-dir") + 2, "--resume")
    else:  # a terminal run: its own resolved config
        cmd = job_command(settings, str(work_dir / "config.yaml"), work_dir, [], resume=True)
    return enqueue(ws, settings, run_id, cmd)


def forget(ws: Workspace, run_id: str) -> None:
    """Drop the run's job record (removing it from the index); refused while it runs or waits."""
    if run_status(ws, run_id).live:
        raise StudioError(f"run {run_id}: it is running or queued; stop it before removing it from the index")
    with ws.connect() as db:
        db.execute("DELETE FROM train_jobs WHERE run_id = ?", (run_id,))
