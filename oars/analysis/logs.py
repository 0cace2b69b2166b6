"""Read a run's scalar logs and analyse them (``tools/analyze_logs.py plot_curve | cal_train_time``).

Where the numbers are: mmengine's ``LocalVisBackend`` writes every logged scalar of a run to
``<work_dir>/<timestamp>/vis_data/scalars.json`` (one JSON object per line; the same lines also go to
``vis_data/<timestamp>.json``). A training line holds the losses, ``lr``, ``time``, ``data_time`` plus ``iter``
(1-based, global), ``epoch`` (epoch-based loops only) and ``step``; a validation (or test) line holds the metrics,
``time``, ``data_time`` and ``step`` only: the epoch for epoch-based loops, the iteration otherwise. A resumed run
adds another ``<timestamp>`` folder; the folders are read in time order and a later line replaces an earlier one
of the same iteration (or validation step).
"""

from __future__ import annotations

import glob
import io
import json
import os.path as osp
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from oars.errors import OarsError

LOG_NAME = "scalars.json"
_BOOKKEEPING = ("step", "iter", "epoch")


@dataclass
class RunLog:
    """The scalar lines of one run, split into training and validation lines (each sorted by its step).

    ``name`` is how the run is named in legends and messages (the run folder's name); ``by_epoch`` tells whether
    the training loop counted epochs, i.e. whether a validation line's ``step`` is an epoch.
    """

    name: str
    files: list[str]
    train: list[dict] = field(default_factory=list)
    val: list[dict] = field(default_factory=list)
    by_epoch: bool = False

    def keys(self) -> list[str]:
        """Every scalar the run logged (bookkeeping keys left out), sorted."""
        found = {k for rec in self.train + self.val for k in rec}
        return sorted(found - set(_BOOKKEEPING))

    def series(self, key: str) -> tuple[np.ndarray, np.ndarray, str]:
        """``(x float64 [N], y float64 [N], x label)`` of ``key``: training lines against the iteration,
        validation lines against the epoch (or the iteration for iteration-based loops). A key logged in both
        (``time``) is read from the training lines."""
        source = self.train if any(key in r for r in self.train) else self.val
        if source is self.train:
            x_key, label = "iter", "iteration"
        else:
            x_key, label = "step", "epoch" if self.by_epoch else "iteration"
        pts = [(float(r[x_key]), float(r[key])) for r in source if key in r and _number(r[key])]
        if not pts:
            return np.zeros(0), np.zeros(0), label
        arr = np.asarray(pts, dtype=np.float64)
        return arr[:, 0], arr[:, 1], label


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def find_scalar_logs(run_dir: str) -> list[str]:
    """The scalar log files of ``run_dir``, oldest run first.

    Args:
        run_dir: a work dir (``<timestamp>/vis_data/scalars.json`` under it), one ``<timestamp>`` folder, or a
            ``scalars.json`` / ``<timestamp>.json`` file itself.

    Raises:
        OarsError: the path does not exist or holds no scalar log, saying where they are looked for.
    """
    if osp.isfile(run_dir):
        return [run_dir]
    if not osp.isdir(run_dir):
        raise OarsError(f"{run_dir}: no such run folder (give a training work dir, e.g. work_dirs/<config>)")
    found = []
    for pattern in (osp.join(run_dir, "vis_data"), osp.join(run_dir, "*", "vis_data")):
        for vis in sorted(glob.glob(pattern)):
            stamp = osp.basename(osp.dirname(vis))
            for name in (LOG_NAME, f"{stamp}.json"):
                if osp.isfile(osp.join(vis, name)):
                    found.append(osp.join(vis, name))
                    break
    if not found:
        raise OarsError(f"{run_dir}: no scalar logs found (looked for <timestamp>/vis_data/{LOG_NAME}, which "
                        "mmengine writes during training; has this run logged anything yet?)")
    return found


def _read_lines(path: str) -> list[dict]:
    records = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as err:
                if n > 1 and not f.read().strip():  # the last line of a run still writing (or killed)
                    break
                raise OarsError(f"{path}:{n}: not a JSON line ({err.msg}); expected mmengine's scalar log "
                                "(one JSON object per line)") from None
            if not isinstance(rec, dict) or "step" not in rec:
                raise OarsError(f"{path}:{n}: expected a JSON object with a 'step' key (mmengine's scalar log), "
                                f"got {line[:80]!r}")
            records.append(rec)
    return records


def load_run(run_dir: str, name: str | None = None) -> RunLog:
    """The :class:`RunLog` of ``run_dir`` (see :func:`find_scalar_logs`): training and validation lines of all
    its runs, later runs (a resume) replacing lines of the same step.

    Raises:
        OarsError: no logs, or a file that is not a scalar log.
    """
    files = find_scalar_logs(run_dir)
    train: dict[float, dict] = {}
    val: dict[float, dict] = {}
    for path in files:
        for rec in _read_lines(path):
            if "iter" in rec:
                train[float(rec["iter"])] = rec
            else:
                val[float(rec["step"])] = rec
    if name is None:
        path = osp.normpath(osp.abspath(run_dir))
        if osp.isfile(path) and osp.basename(osp.dirname(path)) == "vis_data":  # <work>/<stamp>/vis_data/x.json
            path = osp.dirname(osp.dirname(osp.dirname(path)))
        name = osp.basename(path)
    log = RunLog(name=name, files=files,
                 train=[train[k] for k in sorted(train)], val=[val[k] for k in sorted(val)])
    log.by_epoch = any("epoch" in r for r in log.train) or (not log.train and bool(log.val))
    return log


def check_keys(runs: Sequence[RunLog], keys: Sequence[str]) -> None:
    """Every key must be in every run's logs.

    Raises:
        OarsError: naming the run, the missing key and the keys that run has.
    """
    for run in runs:
        have = run.keys()
        missing = [k for k in keys if k not in have]
        if missing:
            raise OarsError(f"{run.name}: key(s) {', '.join(missing)} not in its logs ({', '.join(run.files)}); "
                            f"available keys: {', '.join(have) or 'none'}")


def legend_labels(runs: Sequence[RunLog], keys: Sequence[str], legend: Sequence[str] | None) -> list[list[str]]:
    """Labels ``[run][key]``: ``"<run>: <key>"``; ``legend`` gives one name per run (``"<name>: <key>"``) or one
    label per (run, key) pair, runs outer (MMDetection's ``--legend``).

    Raises:
        OarsError: a ``legend`` of another length.
    """
    if legend is None:
        return [[f"{r.name}: {k}" for k in keys] for r in runs]
    legend = list(legend)
    if len(legend) == len(runs):
        return [[f"{name}: {k}" for k in keys] for name in legend]
    if len(legend) == len(runs) * len(keys):
        return [legend[i * len(keys):(i + 1) * len(keys)] for i in range(len(runs))]
    raise OarsError(f"--legend: {len(legend)} names given; expected one per run ({len(runs)}) or one per run and "
                    f"key ({len(runs) * len(keys)})")


def plot_curves(runs: Sequence[RunLog], keys: Sequence[str], out: str, legend: Sequence[str] | None = None,
                title: str | None = None, overwrite: bool = False) -> str:
    """One panel per key with every run's curve overlaid, saved to ``out`` (the format from its extension:
    png, pdf, svg...; written atomically; an existing file is replaced only with ``overwrite``).

    Returns:
        ``out``.

    Raises:
        OarsError: an existing ``out``, a key a run lacks (with the available keys), a bad ``legend``.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    from oars_deploy.atomic import atomic_write

    if osp.exists(out) and not overwrite:
        raise OarsError(f"--out {out} exists; give another file or --overwrite")
    if not keys:
        raise OarsError("--keys: give at least one logged key (e.g. loss)")
    check_keys(runs, keys)
    labels = legend_labels(runs, keys, legend)
    fig = Figure(figsize=(8, 3.2 * len(keys)), dpi=100)
    FigureCanvasAgg(fig)
    for k, key in enumerate(keys):
        ax = fig.add_subplot(len(keys), 1, k + 1)
        for r, run in enumerate(runs):
            x, y, xlabel = run.series(key)
            ax.plot(x, y, marker="o" if len(x) < 30 else None, markersize=3, label=labels[r][k])
        ax.set_xlabel(xlabel)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs and iterations are whole: no "1.5" tick
        ax.set_ylabel(key)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    ext = osp.splitext(out)[1].lstrip(".").lower() or "png"
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format=ext)
    except ValueError as err:
        raise OarsError(f"--out {out}: matplotlib cannot write .{ext} files ({err})") from None
    atomic_write(out, buf.getvalue())
    return out


@dataclass
class TrainTime:
    """Seconds per training iteration of one run (from the logged ``time``: the mean over each logging window).

    ``per_epoch``: epoch -> mean time per iteration (empty for iteration-based loops); ``mean`` / ``std``: over
    all the logged values kept.
    """

    name: str
    per_epoch: dict[int, float]
    mean: float
    std: float
    count: int


def train_time(run: RunLog, include_outliers: bool = False) -> TrainTime:
    """:class:`TrainTime` of ``run``. The first logged iteration of each epoch (data loader start-up, warm-up
    of cuDNN/compile) is left out unless ``include_outliers``, as in MMDetection.

    Raises:
        OarsError: the run has no training line with ``time``.
    """
    rows = [r for r in run.train if _number(r.get("time"))]
    if not include_outliers:
        firsts, seen = set(), set()
        for i, r in enumerate(rows):
            epoch = r.get("epoch", 0)
            if epoch not in seen:
                seen.add(epoch)
                firsts.add(i)
        kept = [r for i, r in enumerate(rows) if i not in firsts]
        rows = kept or rows  # a run that logged one line per epoch keeps them
    if not rows:
        raise OarsError(f"{run.name}: no training lines with 'time' in {', '.join(run.files)} (was it trained?)")
    times = np.asarray([float(r["time"]) for r in rows], dtype=np.float64)
    per_epoch: dict[int, list[float]] = {}
    for r in rows:
        if "epoch" in r:
            per_epoch.setdefault(int(r["epoch"]), []).append(float(r["time"]))
    means = {e: float(np.mean(v)) for e, v in sorted(per_epoch.items())}
    return TrainTime(run.name, means, float(times.mean()), float(times.std()), len(times))


def format_train_time(t: TrainTime) -> str:
    """MMDetection's ``cal_train_time`` report: slowest and fastest epoch, the spread over epochs, the mean."""
    lines = [f"-----Analyze train time of {t.name}-----"]
    if t.per_epoch:
        slow = max(t.per_epoch, key=t.per_epoch.get)
        fast = min(t.per_epoch, key=t.per_epoch.get)
        lines.append(f"slowest epoch {slow}, average time is {t.per_epoch[slow]:.4f} s/iter")
        lines.append(f"fastest epoch {fast}, average time is {t.per_epoch[fast]:.4f} s/iter")
        lines.append(f"time std over epochs is {float(np.std(list(t.per_epoch.values()))):.4f}")
    lines.append(f"average iter time: {t.mean:.4f} s/iter, std {t.std:.4f} (over {t.count} logged values)")
    return "\n".join(lines)
