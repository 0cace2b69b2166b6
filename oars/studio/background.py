"""Background jobs of the Evaluate and Exports rooms: one pipeline call in a subprocess the studio starts with an
argument list (never a shell string), its state in a ``status.json`` beside its outputs.

Why a subprocess and a file: an evaluation or an export builds a model and may take minutes; in a subprocess it
cannot block or crash the studio, and its state lives on disk, so a page reload or a studio restart shows it
(running / finished / failed with the pipeline's one-line message). The subprocess is
:mod:`oars.studio.pipeline_job`, which calls :mod:`oars.pipelines` and writes the status file itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from oars.studio.security import StudioError

STATUS_FILE = "status.json"
LOG_FILE = "job.log"
START_GRACE_S = 60.0  # a job that has not yet written its own pid counts as running this long


def read_status(folder: Path) -> dict | None:
    """The job status in ``folder`` (``{"state": "running"|"finished"|"failed", "message", "started", ...}``), or
    None when no job ran there. A ``running`` job whose process is gone without writing its end is ``failed``."""
    path = Path(folder) / STATUS_FILE
    try:
        status = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    pid = status.get("pid")
    starting = pid is None and time.time() - float(status.get("started") or 0) < START_GRACE_S
    if status.get("state") == "running" and not starting and not pid_alive(pid):
        status = {**status, "state": "failed",
                  "message": status.get("message") or f"the job stopped without a result (see {LOG_FILE})"}
    return status


def write_status(folder: Path, **status) -> None:
    """Write ``folder/status.json`` atomically (readers never see half a file)."""
    from oars_deploy.atomic import atomic_write

    atomic_write(str(Path(folder) / STATUS_FILE), json.dumps(status, indent=1))


def start_job(folder: Path, args: list[str], python: str | None = None) -> dict:
    """Start ``python -m oars.studio.pipeline_job ARGS`` writing its status and log into ``folder``.

    Args:
        folder: the job's output folder (created); one job at a time per folder.
        args: the job's argument list (:mod:`oars.studio.pipeline_job`'s command line), passed as a list.
        python: the interpreter (the studio's own by default).

    Returns:
        The status written (state ``running``).

    Raises:
        StudioError: a job is still running in ``folder``.
    """
    folder = Path(folder)
    current = read_status(folder)
    if current and current.get("state") == "running":
        raise StudioError(f"{folder.name}: a job is still running there (started "
                          f"{time.strftime('%H:%M:%S', time.localtime(current.get('started', 0)))}); wait for it")
    folder.mkdir(parents=True, exist_ok=True)
    # written before the child starts: the child rewrites it with its pid, then with its end (never the parent
    # after it, which could overwrite a quick child's result)
    status = {"state": "running", "pid": None, "started": time.time(), "message": "", "args": args}
    write_status(folder, **status)
    log = open(folder / LOG_FILE, "wb")  # noqa: SIM115 - handed to the child, closed below
    env = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"))
    try:
        proc = subprocess.Popen([python or sys.executable, "-m", "oars.studio.pipeline_job", "--status-dir",
                                 str(folder), *args], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, start_new_session=True)
    except OSError as err:
        write_status(folder, **{**status, "state": "failed", "message": f"cannot start the job: {err}"})
        raise StudioError(f"cannot start the job: {err}") from None
    finally:
        log.close()
    _reap_later(proc)
    return status


def _reap_later(proc: subprocess.Popen) -> None:
    """Wait for the child in a daemon thread (no zombie; its status file says how it ended)."""
    import threading

    threading.Thread(target=proc.wait, daemon=True).start()


def pid_alive(pid: object) -> bool:
    """Whether process ``pid`` runs: it answers signal 0 and is not a zombie (finished, not yet reaped)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (finished, not yet reaped) is not running
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def wait_for(folder: Path, timeout: float = 600.0, poll: float = 0.2) -> dict | None:
    """The job's status once it is no longer running (tests and scripts; pages poll instead)."""
    deadline = time.monotonic() + timeout
    while True:
        status = read_status(folder)
        if status is None or status.get("state") != "running" or time.monotonic() > deadline:
            return status
        time.sleep(poll)
