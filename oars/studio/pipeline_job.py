"""The studio's background job: one pipeline call (evaluate or export) run in its own process by
:func:`oars.studio.background.start_job`, which writes its end into ``--status-dir``/status.json.

    python -m oars.studio.pipeline_job --status-dir DIR evaluate --config CFG --checkpoint CKPT
    python -m oars.studio.pipeline_job --status-dir DIR export --config CFG --checkpoint CKPT --out-dir OUT
        [--format onnx] [--precision fp32|fp16|int8] [--calib-dir DIR]
    python -m oars.studio.pipeline_job --status-dir DIR scan-dataset --config CFG --split SPLIT [--data D]

A data set's scan (the check of ``tools/check_data.py`` and its labels read, :func:`oars.studio.datasets.scan_into`)
keeps its result in ``DIR/scan.json`` and counts the samples read into the status (``done`` of ``total``).

A user error (the pipelines' :class:`~oars_deploy.errors.UserError`) ends the job ``failed`` with its message, as
the tools print it; any other exception with its type and message (the traceback stays in the job's log).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path

from oars.studio.background import read_status, write_status


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The job's command line (built by the studio's routes, never by a user)."""
    parser = argparse.ArgumentParser(prog="python -m oars.studio.pipeline_job", description=__doc__)
    parser.add_argument("--status-dir", required=True)
    sub = parser.add_subparsers(dest="job", required=True)
    ev = sub.add_parser("evaluate")
    ev.add_argument("--config", required=True)
    ev.add_argument("--checkpoint", required=True)
    ex = sub.add_parser("export")
    ex.add_argument("--config", required=True)
    ex.add_argument("--checkpoint", required=True)
    ex.add_argument("--out-dir", required=True)
    ex.add_argument("--format", default="onnx")
    ex.add_argument("--precision", default="fp32", choices=("fp32", "fp16", "int8"))
    ex.add_argument("--calib-dir", default=None)
    sc = sub.add_parser("scan-dataset")
    sc.add_argument("--config", required=True)
    sc.add_argument("--split", required=True)
    sc.add_argument("--data", default=None)
    return parser.parse_args(argv)


def run_job(args: argparse.Namespace) -> dict:
    """Run the pipeline the arguments name; returns what the status file keeps of its result."""
    if args.job == "evaluate":
        from oars.pipelines.evaluate import evaluate

        result = evaluate(args.config, args.checkpoint, work_dir=args.status_dir, report=True)
        return {"metrics": result.get("metrics", {}), "report": bool(result.get("report_file"))}
    if args.job == "scan-dataset":
        return _scan(args)
    from oars.pipelines.export import export_model

    result = export_model(args.config, args.checkpoint, args.out_dir, fmt=args.format,
                          half=args.precision == "fp16", int8=args.precision == "int8", calib_dir=args.calib_dir)
    fmt = result.get("format") or {}
    return {"format": args.format, "precision": args.precision, "parity": fmt.get("parity"),
            "notes": fmt.get("notes") or []}


def _scan(args: argparse.Namespace) -> dict:
    """Scan the data set into the status folder, counting the samples read into the status (at most twice a
    second: a page polls it)."""
    from oars.studio.datasets import DatasetEntry, scan_into

    folder = Path(args.status_dir)
    entry = DatasetEntry(folder.name, args.config, args.split, args.data, 0.0)
    last = [0.0]

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - last[0] < 0.5:
            return
        last[0] = now
        write_status(folder, **{**(read_status(folder) or {}), "done": done, "total": total})

    result = scan_into(entry, folder, progress)
    return {"samples": len(result["samples"]), "problems": len(result["problems"])}


def main(argv: list[str] | None = None) -> int:
    """Run the job; its status file says how it ended. Returns the exit status (0 finished, 1 failed)."""
    from oars_deploy.errors import UserError, user_message

    args = parse_args(argv)
    folder = Path(args.status_dir)
    base = read_status(folder) or {}
    base.update(pid=os.getpid(), state="running")
    write_status(folder, **base)
    try:
        result = run_job(args)
    except UserError as err:
        write_status(folder, **{**base, "state": "failed", "message": user_message(err), "ended": time.time()})
        return 1
    except Exception as err:  # noqa: BLE001 - any failure is reported in the status, the traceback in the log
        traceback.print_exc()
        write_status(folder, **{**base, "state": "failed", "message": f"{type(err).__name__}: {user_message(err)}",
                                "ended": time.time()})
        return 1
    write_status(folder, **{**base, "state": "finished", "result": result, "ended": time.time()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
