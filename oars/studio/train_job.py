"""The studio's training job: ``oars.pipelines.train.train`` under :func:`oars.cli.run_cli` (the tools' error
printing and Ctrl-C handling), run in its own process group by :mod:`oars.studio.jobs`.

    python -m oars.studio.train_job --config CFG --work-dir DIR [--resume] [--amp] [--compile] [-o KEY=VALUE ...]

At its end it writes ``DIR/studio_job.json``: ``{"exit_code", "message", "ended", "cpu_s"}`` (``cpu_s``: the
job's CPU time, its data workers included); the message is the one line
the tool printed (``error: ...`` without the prefix: a config problem, the Ctrl-C note naming the checkpoint),
never a traceback (an unexpected exception's traceback goes to the log; the record keeps its type and message).
Exit codes: 0 finished, 130 stopped by Ctrl-C (the last checkpoint kept), 2 a user error, 1 anything else.
"""

from __future__ import annotations

import argparse
import io
import json
import resource
import signal
import sys
import time
import traceback
from pathlib import Path

from oars.studio.run_files import JOB_FILE


class _Tee(io.TextIOBase):
    """stderr that also keeps its last few kilobytes (the message ``run_cli`` prints before exiting)."""

    def __init__(self, stream, keep: int = 8192) -> None:
        self.stream, self.keep, self.text = stream, keep, ""

    def write(self, text: str) -> int:
        self.text = (self.text + text)[-self.keep:]
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def fileno(self) -> int:
        return self.stream.fileno()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The job's command line (built by :func:`oars.studio.jobs.job_command`, never typed by a user)."""
    parser = argparse.ArgumentParser(prog="python -m oars.studio.train_job", description=__doc__)
    parser.add_argument("--config", required=True)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--amp", action="store_true")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("-o", dest="overrides", nargs="+", action="extend", default=[])
    return parser.parse_args(argv)


def error_line(printed: str) -> str:
    """The message of the last ``error: ...`` the tool printed (its following lines too: a list of config
    problems), without the prefix; "" when it printed none."""
    at = printed.rfind("error: ")
    return printed[at + len("error: "):].strip() if at >= 0 else ""


def obey_ctrl_c() -> None:
    """Make SIGINT raise ``KeyboardInterrupt`` here whatever this process inherited.

    Why: the studio stops a run with Ctrl-C (SIGINT to its process group), and the pipeline then keeps the last
    checkpoint and exits 130. A studio started where SIGINT is ignored (``oars-studio &`` in a script: a shell
    without job control starts background commands so) passes that on to every child, Python then installs no
    handler, and a stop would let the run train to its end."""
    signal.signal(signal.SIGINT, signal.default_int_handler)


def main(argv: list[str] | None = None) -> int:
    """Train; write the end record; return the exit code."""
    from oars.cli import run_cli

    obey_ctrl_c()
    args = parse_args(argv)
    tee = _Tee(sys.stderr)
    sys.stderr = tee
    code, message = 0, ""

    def train() -> None:
        from oars.pipelines.train import train as run_training

        run_training(args.config, args.overrides, work_dir=args.work_dir, resume=True if args.resume else None,
                     amp=args.amp, compile=args.compile)

    try:
        run_cli(train)
    except SystemExit as err:
        code = err.code if isinstance(err.code, int) else (0 if err.code is None else 1)
    except KeyboardInterrupt:
        code, message = 130, "stopped (Ctrl-C)"
    except BaseException as err:  # noqa: BLE001 - any failure is reported in the record, the traceback in the log
        traceback.print_exc()
        code, message = 1, f"{type(err).__name__}: {err}"
    if code and not message:
        message = error_line(tee.text) or f"the training ended with exit code {code} (see the log)"
    from oars_deploy.atomic import atomic_write

    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    cpu_s = sum(u.ru_utime + u.ru_stime for u in usage)  # the run's own CPU time (data workers included)
    atomic_write(str(Path(args.work_dir) / JOB_FILE),
                 json.dumps({"exit_code": code, "message": message, "ended": time.time(), "cpu_s": round(cpu_s, 3)}))
    sys.stderr = tee.stream
    return code


if __name__ == "__main__":
    sys.exit(main())
