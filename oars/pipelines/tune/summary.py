"""What a finished search leaves: ``best.yaml`` (a config that trains the best trial again:
``tools/train.py -c best.yaml``), ``trials.json`` (every trial: state, value, values of the searched keys, epochs
run, work dir) and ``report.html`` (the trials table, the optimisation history and the keys' importance).

The same records come from Optuna's study and from Ray Tune's results (:class:`TrialRecord`), so both engines end
in the same files.
"""

from __future__ import annotations

import json
import os.path as osp
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from oars.config.load import load_config
from oars.config.yaml_io import config_to_yaml
from oars.pipelines.tune.options import TuneOptions
from oars.visualization.html_report import ReportSection, write_html_report
from oars.visualization.plots import _finish, plot_per_class_bars
from oars_deploy.atomic import atomic_write


@dataclass(frozen=True)
class TrialRecord:
    """One trial as the summary shows it.

    Attributes:
        number: its index in the study. state: ``COMPLETE``, ``PRUNED``, ``FAIL``, ``RUNNING``...
        value: the trial's best validation metric (None: none measured). params: the searched keys' values.
        steps: the validations it reported (epochs). work_dir: its work dir.
    """

    number: int
    state: str
    value: float | None
    params: dict[str, Any]
    steps: int
    work_dir: str


def best_record(records: Sequence[TrialRecord], direction: str) -> TrialRecord | None:
    """The completed trial with the best value (pruned trials stopped early and do not count)."""
    done = [r for r in records if r.state == "COMPLETE" and r.value is not None]
    if not done:
        return None
    pick: Callable = max if direction == "maximize" else min
    return pick(done, key=lambda r: r.value)


def history_plot(records: Sequence[TrialRecord], metric: str, direction: str) -> np.ndarray:
    """The optimisation history: each trial's value by trial number (pruned trials hollow) and the best so far."""
    fig = Figure(figsize=(7.0, 4.0), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    measured = [r for r in records if r.value is not None]
    for state, style in (("COMPLETE", dict(color="tab:blue", label="completed")),
                         ("PRUNED", dict(facecolors="none", edgecolors="tab:gray", label="pruned"))):
        pts = [(r.number, r.value) for r in measured if r.state == state]
        if pts:
            ax.scatter(*zip(*pts), **style)
    done = sorted((r.number, r.value) for r in measured if r.state == "COMPLETE")
    if done:
        pick = np.maximum if direction == "maximize" else np.minimum
        ax.step([n for n, _ in done], pick.accumulate([v for _, v in done]), where="post", color="tab:red",
                label="best so far")
    ax.set(xlabel="trial", ylabel=f"{metric} (fraction 0-1 where the metric is one)", title="optimisation history")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.legend(loc="best")
    return _finish(fig, None)


def write_summary(options: TuneOptions, records: Sequence[TrialRecord],
                  importance: dict[str, float] | None, engine: str) -> dict[str, Any]:
    """Write ``best.yaml``, ``trials.json`` and ``report.html`` into the study's folder.

    Returns:
        ``{'best': TrialRecord | None, 'best_yaml': path | None, 'report': path, 'trials': path}``.
    """
    best = best_record(records, options.direction)
    best_yaml = None
    if best is not None:
        cfg = load_config(options.config, options.trial_overrides(best.params))
        best_yaml = osp.join(options.work_dir, "best.yaml")
        header = (f"# the best trial ({best.number}, {options.metric} = {best.value:.4f}) of the search over "
                  f"{options.space.source}\n# on {options.config}: tools/train.py -c best.yaml trains it again\n")
        atomic_write(best_yaml, header + config_to_yaml(cfg))
    trials_json = osp.join(options.work_dir, "trials.json")
    atomic_write(trials_json, json.dumps({"engine": engine, "metric": options.metric, "direction": options.direction,
                                          "best": None if best is None else best.number,
                                          "trials": [asdict(r) for r in records]}, indent=1))
    keys = [p.key for p in options.space.params]
    rows = [[r.number, r.state, "-" if r.value is None else round(r.value, 4), r.steps,
             *[json.dumps(r.params.get(k)) for k in keys]] for r in records]
    sections = [ReportSection("Trials", text=f"{engine}; {options.metric} ({options.direction}); best: "
                              + ("none completed" if best is None else f"trial {best.number}"),
                              tables=[{"header": ["trial", "state", options.metric, "epochs", *keys], "rows": rows}],
                              images=[("optimisation history", history_plot(records, options.metric,
                                                                            options.direction))])]
    if importance:
        sections.append(ReportSection("Importance of the searched keys",
                                      text="Optuna's default importance evaluator, normalised to sum to 1",
                                      images=[plot_per_class_bars(importance, "importance")]))
    report = write_html_report(osp.join(options.work_dir, "report.html"), f"search: {options.study_name}", sections)
    return {"best": best, "best_yaml": best_yaml, "report": report, "trials": trials_json}


def print_table(records: Sequence[TrialRecord], options: TuneOptions, best: TrialRecord | None,
                out: Callable[[str], Any] = print) -> None:
    """The console's view of the study: one line per trial, then the best one."""
    out(f"{'trial':>5}  {'state':<8} {options.metric:>12}  epochs  values")
    for r in records:
        value = "-" if r.value is None else f"{r.value:.4f}"
        out(f"{r.number:>5}  {r.state:<8} {value:>12}  {r.steps:>6}  "
            + ", ".join(f"{k}={v!r}" for k, v in r.params.items()))
    if best is None:
        out("no trial completed")
    else:
        out(f"best: trial {best.number}, {options.metric} = {best.value:.4f} ({best.work_dir})")
