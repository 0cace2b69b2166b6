"""Does a hyper-parameter search beat the shipped config, and how much compute does its pruner save?

One run: the shipped config trained with the search's budget (``--budget-epochs``, validated every epoch, its cosine
schedule fitted to the budget), then ``oars.pipelines.tune.tune`` (what ``tools/tune.py`` runs) for ``--trials``
trials of the same budget over learning rate, weight decay, warm-up length and augmentation strength, with the
successive-halving pruner. Reported: the best trial's validation metric against the shipped config's (each the best
validation of its run, as a trial's value is), the epochs the search ran against the ``trials x budget`` a search
without pruning would run (the share the pruner saves), and the wall time of both.

The best trial is the best of N on the same validation split that chose it: its edge over the shipped config is
an upper bound of what a fresh training of ``best.yaml`` would show.

    python benchmarks/tune_search.py [--models unet,yolov3] [--trials 20] [--budget-epochs 8]
                                     [--pruner halving|hyperband|none] [--min-epochs 1]
                                     [--work-dir work_dirs/bench_tune_search]
                                     [--seed 0] [--num-train N --num-val N --data DIR] [-o key=value ...]

Writes ``<work-dir>/<model>/`` (the baseline's and the study's work dirs) and ``<work-dir>/tune_search.json``, and
prints a markdown table. Re-running continues the studies (Optuna storage) and reuses a finished baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

import yaml

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import ROOT  # noqa: E402


@dataclass(frozen=True)
class Case:
    """A model searched: its config, the metric, the schedule keys fitted to the budget and the search space."""

    label: str
    config: str
    metric: str
    cosine: str  # the -o path of the cosine scheduler's T_max, set to the budget for the baseline and every trial
    space: dict[str, Any]


# the same four kinds of key on both demos: lr, weight decay, warm-up iterations, augmentation strength
MODELS = {
    "unet": Case(
        "U-Net demo", "configs/segmentation/unet/unet_demo_shapes.yaml", "mIoU", "param_scheduler.1.T_max",
        {"optim_wrapper.optimizer.lr": {"type": "float", "low": 3.0e-4, "high": 1.0e-2, "log": True},
         "optim_wrapper.optimizer.weight_decay": {"type": "float", "low": 1.0e-5, "high": 1.0e-2, "log": True},
         "param_scheduler.0.end": {"type": "int", "low": 10, "high": 150, "step": 20},
         "train_dataloader.dataset.pipeline.2.ratio_range": {"type": "choice",
                                                             "values": [[0.9, 1.1], [0.8, 1.25], [0.5, 2.0]]}}),
    "yolov3": Case(
        "YOLOv3 demo", "configs/detection/yolov3/yolov3_darknet53_demo_shapes.yaml", "coco/bbox_mAP_50",
        "param_scheduler.1.T_max",
        {"optim_wrapper.optimizer.lr": {"type": "float", "low": 3.0e-4, "high": 1.0e-2, "log": True},
         "optim_wrapper.optimizer.weight_decay": {"type": "float", "low": 1.0e-5, "high": 1.0e-2, "log": True},
         "param_scheduler.0.end": {"type": "int", "low": 10, "high": 150, "step": 20}}),
}


def data_overrides(data: str | None) -> list[str]:
    """``data_root`` of every loader set to ``data`` (None: the config's own)."""
    if data is None:
        return []
    return [f"{split}.dataset.data_root={data}" for split in ("train_dataloader", "val_dataloader", "test_dataloader")]


def train_baseline(case: Case, overrides: list[str], work_dir: str) -> dict[str, Any]:
    """The shipped config trained with ``overrides`` (the budget, validation every epoch), its best validation
    taken as a trial's value is (:class:`oars.pipelines.tune.trial_hook.TrialReportHook`). A finished run's
    ``baseline.json`` is reused."""
    from oars.pipelines.train import train
    from oars.pipelines.tune.trial_hook import TrialReportHook

    done = os.path.join(work_dir, "baseline.json")
    if os.path.isfile(done):
        with open(done) as f:
            record = json.load(f)
        if record.get("overrides") == overrides:
            return record
    values: list[float] = []
    hook = TrialReportHook(case.metric, lambda value, _step: values.append(value), case.config)
    start = time.perf_counter()
    train(os.path.join(ROOT, case.config), overrides, work_dir=work_dir, overwrite=True, hooks=[hook])
    record = {"overrides": overrides, "values": values, "best": max(values) if values else None,
              "epochs": len(values), "wall_s": time.perf_counter() - start}
    with open(done, "w") as f:
        json.dump(record, f, indent=1)
    return record


def run_search(case: Case, args: argparse.Namespace, common: list[str], work_dir: str) -> dict[str, Any]:
    """``tune`` over the case's space; the epochs each trial ran (its validations) and the wall time."""
    from oars.pipelines.tune import tune

    os.makedirs(work_dir, exist_ok=True)
    space = os.path.join(work_dir, "space.yaml")
    with open(space, "w") as f:
        yaml.safe_dump(case.space, f, sort_keys=False)
    start = time.perf_counter()
    summary = tune(os.path.join(ROOT, case.config), space, trials=args.trials, metric=case.metric,
                   direction="max", budget_epochs=args.budget_epochs, work_dir=work_dir, overrides=common,
                   seed=args.seed, pruner=args.pruner, min_epochs=args.min_epochs)
    wall = time.perf_counter() - start
    with open(summary["trials"]) as f:
        trials = json.load(f)
    return {"trials": trials, "wall_s": wall, "best_yaml": summary["best_yaml"]}


def summarise(case: Case, args: argparse.Namespace, baseline: dict[str, Any], search: dict[str, Any]) -> dict:
    """One table row: best trial vs shipped config, epochs run vs a search without pruning, wall times."""
    rows = [t for t in search["trials"]["trials"] if t["state"] in ("COMPLETE", "PRUNED")]
    complete = [t for t in rows if t["state"] == "COMPLETE" and t["value"] is not None]
    best = max(complete, key=lambda t: t["value"]) if complete else None
    epochs = sum(int(t["steps"]) for t in rows)
    full = len(rows) * args.budget_epochs
    return {"model": case.label, "config": case.config, "metric": case.metric, "trials": len(rows),
            "pruned": sum(t["state"] == "PRUNED" for t in rows), "budget_epochs": args.budget_epochs,
            "shipped": baseline["best"], "best_trial": best["value"] if best else None,
            "best_params": best["params"] if best else None, "epochs_run": epochs, "epochs_without_pruning": full,
            "saved": 1.0 - epochs / full if full else None, "baseline_wall_s": baseline["wall_s"],
            "search_wall_s": search["wall_s"], "best_yaml": search["best_yaml"]}


def table(rows: list[dict]) -> str:
    """The markdown table of the summaries."""
    lines = ["| model | trials (pruned) | epochs per trial | shipped config | best trial | epochs run / without "
             "pruning | saved | wall: shipped run / search |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        best = "-" if r["best_trial"] is None else f"{r['best_trial']:.4f}"
        lines.append(f"| {r['model']} ({r['metric']}) | {r['trials']} ({r['pruned']}) | {r['budget_epochs']} | "
                     f"{r['shipped']:.4f} | {best} | {r['epochs_run']} / {r['epochs_without_pruning']} | "
                     f"{r['saved']:.0%} | {r['baseline_wall_s'] / 60:.1f} / {r['search_wall_s'] / 60:.1f} min |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="unet", help=f"comma-separated, of {sorted(MODELS)}")
    p.add_argument("--trials", type=int, default=20, help="finished trials per search (default %(default)s)")
    p.add_argument("--budget-epochs", type=int, default=8, help="epochs per trial and for the shipped config")
    p.add_argument("--pruner", default="halving", choices=["halving", "hyperband", "none"])
    p.add_argument("--min-epochs", type=int, default=1, help="the pruner's first rung (default %(default)s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--work-dir", default=os.path.join("work_dirs", "bench_tune_search"))
    p.add_argument("--data", default=None, help="the demo shapes folder (default: the configs' data/demo_shapes)")
    p.add_argument("--num-train", type=int, default=None, help="generate --data with this many training images")
    p.add_argument("--num-val", type=int, default=None, help="generate --data with this many validation images")
    p.add_argument("-o", "--overrides", nargs="*", default=[], help="-o key=value for every run (e.g. num_workers)")
    args = p.parse_args(argv)
    args.names = [n for n in args.models.split(",") if n]
    if not args.names or any(n not in MODELS for n in args.names):
        p.error(f"--models {args.models}: expected names from {sorted(MODELS)}")
    if (args.num_train or args.num_val) and not args.data:
        p.error("--num-train / --num-val generate a smaller set: give its folder with --data (the shared "
                "data/demo_shapes is not rewritten)")
    if args.trials < 1 or args.budget_epochs < 1:
        p.error(f"--trials {args.trials} --budget-epochs {args.budget_epochs}: both must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from oars.data.demo_shapes import generate

    sizes = {k: v for k, v in (("num_train", args.num_train), ("num_val", args.num_val)) if v is not None}
    generate(args.data or os.path.join(ROOT, "data", "demo_shapes"), **sizes)
    rows = []
    for name in args.names:
        case = MODELS[name]
        common = [*data_overrides(args.data), *args.overrides, f"{case.cosine}={args.budget_epochs}"]
        folder = os.path.abspath(os.path.join(args.work_dir, name))
        baseline = train_baseline(case, [*common, f"train_cfg.max_epochs={args.budget_epochs}",
                                         "train_cfg.val_interval=1"], os.path.join(folder, "shipped"))
        print(f"{case.label}: shipped config, {args.budget_epochs} epochs: best {case.metric} {baseline['best']:.4f} "
              f"in {baseline['wall_s'] / 60:.1f} min", flush=True)
        search = run_search(case, args, common, os.path.join(folder, "search"))
        rows.append(summarise(case, args, baseline, search))
    out = os.path.join(args.work_dir, "tune_search.json")
    with open(out, "w") as f:
        json.dump({"trials": args.trials, "budget_epochs": args.budget_epochs, "pruner": args.pruner,
                   "min_epochs": args.min_epochs, "seed": args.seed, "rows": rows}, f, indent=1)
    print(table(rows))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
