"""Search hyper-parameters: tools/tune.py -c CONFIG --space SPACE.yaml --trials N [--metric mIoU --direction max]
[--budget-epochs E] [--storage sqlite:///study.db | journal:study.log] [--pruner halving|hyperband|none]
[--ray [--ray-address A]] [--work-dir DIR] [-o key=value ...].

SPACE.yaml maps config keys (the paths -o takes) to a distribution each:

    optim_wrapper.optimizer.lr: {type: float, low: 1.0e-4, high: 1.0e-1, log: true}
    optim_wrapper.optimizer.weight_decay: {type: float, low: 0.0, high: 1.0e-3}
    train_dataloader.batch_size: {type: choice, values: [4, 8]}

Each trial is an ordinary training run in DIR/trial_NNN/ (logs, checkpoints, resume), validated every epoch; the
pruner (successive halving by default, ASHA with --ray) stops a trial whose metric falls behind the others'. The
study is stored in DIR/study.db: re-running the same command continues it (a trial the kill interrupted resumes
from its checkpoint). At the end: the trials table, DIR/best.yaml (tools/train.py -c DIR/best.yaml trains the best
trial again), DIR/trials.json and DIR/report.html (history and importance of each key). optuna-dashboard reads the
storage: optuna-dashboard sqlite:///DIR/study.db.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from oars.cli import base_parser, run_cli
from oars.pipelines.tune import tune


def main(argv: Sequence[str] | None = None) -> None:
    parser = base_parser(__doc__)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--space", required=True, help="the search space: a YAML file of config keys")
    parser.add_argument("--trials", type=int, required=True, help="finished (completed or pruned) trials to reach")
    parser.add_argument("--metric", default=None,
                        help="the validation metric to optimise (default: the config's save_best)")
    parser.add_argument("--direction", default=None, choices=["max", "min"],
                        help="max or min (default: the config's save_best rule, else max)")
    parser.add_argument("--budget-epochs", type=int, default=None, help="epochs per trial (default: the config's)")
    parser.add_argument("--storage", default=None,
                        help="Optuna storage: sqlite:///PATH.db (default DIR/study.db) or journal:PATH.log")
    parser.add_argument("--study-name", default=None, help="the study's name in the storage (default: the config's)")
    parser.add_argument("--pruner", default="halving", choices=["halving", "hyperband", "none"],
                        help="stop hopeless trials: successive halving (default), Hyperband, or none")
    parser.add_argument("--min-epochs", type=int, default=1,
                        help="the pruner's first rung: no trial is stopped before this many epochs (default 1; raise "
                             "it when every trial scores alike after the first epochs, docs/search.md)")
    parser.add_argument("--seed", type=int, default=0, help="the sampler's seed (default 0)")
    parser.add_argument("--ray", action="store_true", help="run the trials on Ray Tune (Optuna sampler + ASHA)")
    parser.add_argument("--ray-address", default=None, help="--ray: the cluster's address (default: a local Ray)")
    parser.add_argument("--logger", dest="loggers", action="append", default=[],
                        help="experiment tracker for every trial (mlflow, wandb, tensorboard), as tools/train.py")
    args = parser.parse_args(argv)
    tune(args.config, args.space, trials=args.trials, metric=args.metric, direction=args.direction,
         budget_epochs=args.budget_epochs, work_dir=args.work_dir, storage=args.storage, study_name=args.study_name,
         overrides=args.overrides, seed=args.seed, pruner=args.pruner, loggers=args.loggers, ray=args.ray,
         ray_address=args.ray_address, min_epochs=args.min_epochs)


if __name__ == "__main__":
    run_cli(main)
