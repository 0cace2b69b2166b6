"""What a search runs: the options of ``tools/tune.py`` / ``oars.Model.tune`` resolved against the config.

The searched metric and its direction default to the config's own choice of best checkpoint
(``default_hooks.checkpoint.save_best`` / ``rule``), so a search optimises what training already calls best.
"""

from __future__ import annotations

import os
import os.path as osp
from collections.abc import Sequence
from dataclasses import dataclass, field

from mmengine.config import Config

from oars.errors import OarsError
from oars.pipelines.tune.space import SearchSpace, overrides_for

DIRECTIONS = {"max": "maximize", "maximize": "maximize", "greater": "maximize",
              "min": "minimize", "minimize": "minimize", "less": "minimize"}
PRUNERS = ("halving", "hyperband", "none")


class TuneError(OarsError):
    """A search that cannot run as asked; the message names the flag or key and the fix."""


@dataclass(frozen=True)
class TuneOptions:
    """A resolved search.

    Attributes:
        config: the config file (absolute). space: the searched keys. trials: finished trials (completed or
            pruned) the study should hold. metric: the validation metric's key. direction: ``maximize`` or
            ``minimize``. budget_epochs: epochs per trial (None: the config's). work_dir: the study's folder
            (``trial_NNN/`` work dirs, ``best.yaml``, the report). storage: Optuna's storage URL (``sqlite:///``
            or ``journal:`` + a file path). study_name: the study's name in the storage. overrides: ``-o``
            strings every trial gets. seed: the sampler's seed. pruner: ``halving``, ``hyperband`` or ``none``.
        min_epochs: the pruner's first rung (Optuna's ``min_resource``, ASHA's ``grace_period``): no trial is
            stopped before this many validations. Why not always 1: a metric that is flat over the first epochs
            (the demo U-Net's mIoU is the same for every trial after epoch 1) ranks trials by noise there.
    """

    config: str
    space: SearchSpace
    trials: int
    metric: str
    direction: str
    budget_epochs: int | None
    work_dir: str
    storage: str
    study_name: str
    overrides: tuple[str, ...] = ()
    seed: int = 0
    pruner: str = "halving"
    loggers: tuple[str, ...] = field(default=())
    min_epochs: int = 1

    def trial_overrides(self, params: dict) -> list[str]:
        """Every ``-o`` a trial with ``params`` trains with: the user's, the budget, then the trial's values."""
        budget = [] if self.budget_epochs is None else [f"train_cfg.max_epochs={self.budget_epochs}"]
        return [*self.overrides, *budget, "train_cfg.val_interval=1", *overrides_for(params)]


def _default_metric(cfg: Config) -> tuple[str | None, str | None]:
    checkpoint = (cfg.get("default_hooks") or {}).get("checkpoint") or {}
    best = checkpoint.get("save_best")
    if isinstance(best, list):
        best = best[0] if best else None
    rule = checkpoint.get("rule")
    if isinstance(rule, list):
        rule = rule[0] if rule else None
    return (best if isinstance(best, str) and best != "auto" else None), rule


def resolve_options(cfg: Config, config: str, space: SearchSpace, *, trials: int, metric: str | None = None,
                    direction: str | None = None, budget_epochs: int | None = None, work_dir: str | None = None,
                    storage: str | None = None, study_name: str | None = None, overrides: Sequence[str] = (),
                    seed: int = 0, pruner: str = "halving", loggers: Sequence[str] = (),
                    min_epochs: int = 1) -> TuneOptions:
    """Check the flags against the loaded config and fill the defaults.

    Raises:
        TuneError: trials < 1, an unknown direction or pruner, no metric given nor chosen by the config, a budget
            of epochs on an iteration-based loop, a budget below 1, ``min_epochs`` below 1 or above the budget.
        SearchSpaceError: a searched key the config does not have.
    """
    if trials < 1:
        raise TuneError(f"--trials {trials}: a search needs at least one trial")
    if pruner not in PRUNERS:
        raise TuneError(f"--pruner {pruner!r}: expected one of {', '.join(PRUNERS)}")
    space.check_keys(cfg)
    config_metric, rule = _default_metric(cfg)
    metric = metric or config_metric
    if not metric:
        raise TuneError(f"--metric is required: {config} chooses no best checkpoint "
                        "(default_hooks.checkpoint.save_best) to default to; e.g. --metric mIoU --direction max")
    given = direction or rule or "greater"
    if given not in DIRECTIONS:
        raise TuneError(f"--direction {given!r}: expected max or min")
    train_cfg = cfg.get("train_cfg") or {}
    if budget_epochs is not None:
        if budget_epochs < 1:
            raise TuneError(f"--budget-epochs {budget_epochs}: a trial needs at least one epoch")
        if "max_iters" in train_cfg:
            raise TuneError(f"--budget-epochs: {config} trains by iterations (train_cfg.max_iters); set the "
                            "budget with -o train_cfg.max_iters=N instead")
    budget = budget_epochs if budget_epochs is not None else train_cfg.get("max_epochs")
    if min_epochs < 1 or (budget is not None and min_epochs > budget):
        raise TuneError(f"--min-epochs {min_epochs}: the pruner's first rung must be between 1 and the budget "
                        f"({budget} epochs)" if budget is not None else
                        f"--min-epochs {min_epochs}: the pruner's first rung must be at least 1")
    stem = osp.splitext(osp.basename(config))[0]
    work_dir = osp.abspath(work_dir or osp.join("work_dirs", "tune", stem))
    if storage is None:
        storage = f"sqlite:///{osp.join(work_dir, 'study.db')}"
    return TuneOptions(config=osp.abspath(config), space=space, trials=trials, metric=metric,
                       direction=DIRECTIONS[given], budget_epochs=budget_epochs, work_dir=work_dir,
                       storage=storage, study_name=study_name or stem, overrides=tuple(overrides), seed=seed,
                       pruner=pruner, loggers=tuple(loggers), min_epochs=min_epochs)


def trial_dir(options: TuneOptions, name: str) -> str:
    """The work dir of the trial called ``name`` (``trial_007``) under the study's folder."""
    return os.path.join(options.work_dir, name)
