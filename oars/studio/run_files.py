"""What a run *is*, read from the files the tools write into its work dir: ``config.yaml`` (task, config name,
loop length, the metric the checkpoints are ranked by), the scalar logs (curves, best metric, progress), the text
log (progress line with its ETA, the tail shown on the run's page), ``last_checkpoint`` and, for runs the studio
launched, ``studio_job.json`` (how the job ended, :mod:`oars.studio.train_job`).

Why read files and keep nothing else: a run started in a terminal and registered in the studio has only these,
and a studio restarted over the same workspace must show the same thing as before.
"""

from __future__ import annotations

import glob
import json
import os
import re
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from oars.analysis.logs import RunLog, find_scalar_logs, load_run
from oars.errors import OarsError

_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when built with it: a run's config is long
JOB_FILE = "studio_job.json"
JOB_LOG = "studio_job.log"
#: a run without a job record whose log changed this recently counts as running (a terminal run)
TERMINAL_RUN_FRESH_S = 120.0
_PROGRESS = re.compile(r"(Epoch|Iter)\(train\)\s+(?:\[(\d+)\])?\s*\[\s*(\d+)/(\d+)\]")
_TRAINING_LINE = re.compile(r"training (\S+\.ya?ml): ")
_ETA = re.compile(r"eta: (\S+)")
_NOT_CURVES = ("data_time", "time", "samples_per_s", "epoch", "iter", "step")


@dataclass
class RunConfig:
    """What the studio shows of a run's ``config.yaml``: its task, its name and the loop's length."""

    text: str = ""
    scope: str | None = None
    max_epochs: int | None = None
    max_iters: int | None = None
    best_key: str | None = None
    best_rule: str = "greater"
    data: dict = field(default_factory=dict)


def read_config(work_dir: Path) -> RunConfig:
    """The run's ``config.yaml`` (an empty :class:`RunConfig` when it is missing or not YAML: a queued run has
    none yet). Read as plain YAML: the resolved config a run writes is complete, nothing to merge. Parsed once per
    version of the file (a watched run's page asks every second)."""
    path = Path(work_dir) / "config.yaml"
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        return RunConfig()
    return _read_config(str(path), stamp)


@lru_cache(maxsize=256)
def _read_config(path: str, stamp: int) -> RunConfig:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        data = yaml.load(text, Loader=_YAML_LOADER)
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return RunConfig()
    if not isinstance(data, dict):
        return RunConfig(text=text)
    train_cfg = data.get("train_cfg") if isinstance(data.get("train_cfg"), dict) else {}
    ckpt = ((data.get("default_hooks") or {}).get("checkpoint") or {}) if isinstance(data.get("default_hooks"),
                                                                                        dict) else {}
    best = ckpt.get("save_best") if isinstance(ckpt, dict) else None
    if isinstance(best, list):
        best = best[0] if best else None
    rule = ckpt.get("rule") if isinstance(ckpt, dict) else None
    return RunConfig(text=text, scope=data.get("default_scope") if isinstance(data.get("default_scope"), str) else None,
                     max_epochs=_int(train_cfg.get("max_epochs")), max_iters=_int(train_cfg.get("max_iters")),
                     best_key=best if isinstance(best, str) and best != "auto" else None,
                     best_rule=rule if rule in ("greater", "less") else "greater", data=data)


def config_name(work_dir: Path, indexed: str | None = None) -> str | None:
    """The config a run came from: what the index recorded at launch, else the file the text log names where
    training starts (``training configs/x/y.yaml: ...``, after mmengine's set-up dump; kept once found)."""
    if indexed:
        return indexed
    log = text_log(work_dir)
    if log is None:
        return None
    if str(log) in _NAMES_FOUND:
        return _NAMES_FOUND[str(log)]
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            head = f.read(1024 * 1024)
    except OSError:
        return None
    found = _TRAINING_LINE.search(head)
    if found:
        _NAMES_FOUND[str(log)] = found.group(1)
    return found.group(1) if found else None


_NAMES_FOUND: dict[str, str] = {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_job(work_dir: Path) -> dict | None:
    """The studio job's end record (``{"exit_code", "message", "ended", ...}``), or None before its end (or for a
    run the studio did not launch)."""
    try:
        record = json.loads((Path(work_dir) / JOB_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def scalar_log(work_dir: Path) -> RunLog | None:
    """The run's scalar lines (:func:`oars.analysis.logs.load_run`, the one reader ``analyze_logs`` uses), or
    None before its first logged line. Read once per version of the files (a live page's curves ask for them
    several times per change)."""
    files = _scalar_files(work_dir)
    stamp = []
    for path in files:
        try:
            st = path.stat()
        except OSError:
            return None
        stamp.append((str(path), st.st_size, st.st_mtime_ns))
    return _scalar_log(str(work_dir), tuple(stamp)) if files else None


@lru_cache(maxsize=64)
def _scalar_log(work_dir: str, stamp: tuple) -> RunLog | None:
    try:
        return load_run(work_dir)
    except OarsError:
        return None


def curves(log: RunLog | None, train_from: int = 0, val_from: int = 0) -> dict:
    """The curves JSON the pages draw: ``{"x", "x_label", "series", "val"}``; training series (losses, lr)
    against the iteration, the validation metrics in ``val`` against the epoch (or iteration).

    Args:
        log: the run's scalar lines (None before the first).
        train_from, val_from: skip the first lines of each kind: a live page's event carries only the lines after
            those it already drew.
    """
    if log is None:
        return {"x": [], "x_label": "iteration", "series": {}, "val": {"x": [], "x_label": "epoch", "series": {}}}
    train, val = log.train[train_from:], log.val[val_from:]
    train_keys = sorted({k for r in train for k in r} - set(_NOT_CURVES))
    x = [float(r["iter"]) for r in train]
    series = {k: [_num(r.get(k)) for r in train] for k in train_keys}
    val_keys = sorted({k for r in val for k in r} - set(_NOT_CURVES))
    val_curves = {"x": [float(r["step"]) for r in val], "x_label": "epoch" if log.by_epoch else "iteration",
                  "series": {k: [_num(r.get(k)) for r in val] for k in val_keys}}
    return {"x": x, "x_label": "iteration", "series": series, "val": val_curves}


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def best_metric(log: RunLog | None, config: RunConfig) -> tuple[str, float] | None:
    """``(key, value)`` of the best validation value: the key the checkpoints are ranked by (``save_best``), else
    the first metric logged; the highest unless the config's ``rule`` is ``less``."""
    if log is None or not log.val:
        return None
    keys = [k for k in log.val[-1] if k not in _NOT_CURVES]
    key = config.best_key if config.best_key in keys else (keys[0] if keys else None)
    values = [v for v in (_num(r.get(key)) for r in log.val) if v is not None] if key else []
    if not values:
        return None
    return key, (min(values) if config.best_rule == "less" else max(values))


def text_log(work_dir: Path) -> Path | None:
    """The newest mmengine text log (``<work_dir>/<timestamp>/<timestamp>.log``), else the studio job's log."""
    logs = sorted(glob.glob(os.path.join(glob.escape(str(work_dir)), "*", "*.log")))
    if logs:
        return Path(logs[-1])
    job_log = Path(work_dir) / JOB_LOG
    return job_log if job_log.is_file() else None


def tail(path: Path | None, lines: int = 40, max_bytes: int = 64 * 1024) -> str:
    """The last ``lines`` lines of ``path`` (read from its end: a long run's log is never read whole)."""
    if path is None:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


@dataclass
class Progress:
    """Iterations done of the total, the ETA mmengine printed, and the epochs done."""

    done: int = 0
    total: int | None = None
    eta: str | None = None
    epochs_done: int = 0

    @property
    def percent(self) -> float | None:
        return 100.0 * self.done / self.total if self.total else None

    def text(self, eta: bool = True) -> str:
        """``iteration 25/300 (8 %), ETA 0:00:37`` (``eta``: False for a run no longer running)."""
        if not self.done and not self.total:
            return "not started"
        pct = f" ({self.percent:.0f} %)" if self.percent is not None else ""
        eta = f", ETA {self.eta}" if self.eta and eta else ""
        return f"iteration {self.done}/{self.total or '?'}{pct}{eta}"


def progress(work_dir: Path, log: RunLog | None, config: RunConfig, log_tail: str) -> Progress:
    """How far the run's loop is. From the text log's last progress line when there is one (``Epoch(train)
    [e][i/n]``: (e - 1) x n + i of the config's epochs x n; ``Iter(train) [i/n]``: i of n) with its ETA: a run
    resumed from a checkpoint in the middle of an epoch starts that epoch again, and the line says where the loop
    is, while the iteration counter keeps counting. Else from the scalar log's last training line."""
    done = int(log.train[-1]["iter"]) if log and log.train else 0
    epochs_done = int(log.train[-1].get("epoch", 0)) if log and log.train else 0
    total = config.max_iters
    eta = None
    matches = list(_PROGRESS.finditer(log_tail))
    if matches:
        last = matches[-1]
        index, per_epoch = int(last.group(3)), int(last.group(4))
        if last.group(1) == "Epoch" and last.group(2):
            epoch = int(last.group(2))
            done = (epoch - 1) * per_epoch + index
            total = per_epoch * config.max_epochs if config.max_epochs else None
            epochs_done = epoch - 1 + (1 if index == per_epoch else 0)
        else:
            done, total = index, per_epoch
        etas = _ETA.findall(log_tail)
        eta = etas[-1] if etas else None
    if total and done >= total:
        eta = None
        if config.max_epochs:
            epochs_done = config.max_epochs
    return Progress(done=done, total=total, eta=eta, epochs_done=epochs_done)


def last_checkpoint(work_dir: Path) -> str | None:
    """The checkpoint ``last_checkpoint`` names (None before the first one is saved)."""
    try:
        text = (Path(work_dir) / "last_checkpoint").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text or None


def log_mtime(work_dir: Path) -> float | None:
    """When the run last wrote a log line (the text or the scalar log), or None."""
    times = []
    log = text_log(work_dir)
    if log is not None:
        times.append(log.stat().st_mtime)
    try:
        times += [os.stat(p).st_mtime for p in find_scalar_logs(str(work_dir))]
    except OarsError:
        pass
    return max(times) if times else None


def files_signature(work_dir: Path) -> tuple:
    """Sizes and times of the files a live page follows: a change means new lines to show."""
    sig = []
    for path in (*_scalar_files(work_dir), text_log(work_dir), Path(work_dir) / JOB_FILE,
                 Path(work_dir) / "last_checkpoint"):
        try:
            st = os.stat(path) if path is not None else None
        except OSError:
            st = None
        sig.append((st.st_size, st.st_mtime_ns) if st else None)
    return tuple(sig)


def _scalar_files(work_dir: Path) -> list[Path]:
    try:
        return [Path(p) for p in find_scalar_logs(str(work_dir))]
    except OarsError:
        return []


def age_text(seconds: float | None) -> str:
    """``3 min``, ``2 h 5 min``: how long something took, for the tables."""
    if seconds is None or seconds < 0:
        return ""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


def now() -> float:
    return time.time()
