"""The pruner's first rung (``min_epochs``: Optuna's ``min_resource``, ASHA's ``grace_period``).

Measured on the U-Net demo (docs/search.md): the mIoU after epoch 1 is the same for nearly every trial, and with the
first rung at epoch 1 the pruner stopped trials whose epoch-1 value equalled that of the trials that went on to be
the best. A later first rung lets every trial past the flat start; a rung outside the budget is refused.
"""

from __future__ import annotations

import pytest
import yaml
from demo_utils import DEMO_CFG

from oars.config import load_config
from oars.pipelines.tune.options import TuneError, resolve_options
from oars.pipelines.tune.space import load_space

optuna = pytest.importorskip("optuna")

SPACE = {"optim_wrapper.optimizer.lr": {"type": "float", "low": 1.0e-3, "high": 1.0e-1, "log": True}}
# the U-Net demo's shape: every trial at the same value after epoch 1, apart by epoch 3 (the last the best)
PLANTED = [[0.009, 0.2, 0.3], [0.009, 0.1, 0.12], [0.010, 0.05, 0.06], [0.011, 0.04, 0.05], [0.009, 0.25, 0.35]]


def options(tmp_path, **kwargs):
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(SPACE))
    return resolve_options(load_config(DEMO_CFG), DEMO_CFG, load_space(space), trials=5,
                           work_dir=str(tmp_path / "study"), **kwargs)


def run_planted(tmp_path, min_epochs: int) -> list[str]:
    """The planted curves through the pruner the study builds; each trial's final state."""
    from oars.pipelines.tune.study import _pruner

    pruner = _pruner(options(tmp_path, budget_epochs=3, min_epochs=min_epochs))
    study = optuna.create_study(direction="maximize", pruner=pruner)

    def objective(trial):
        for step, value in enumerate(PLANTED[trial.number], 1):
            trial.report(value, step)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return PLANTED[trial.number][-1]

    study.optimize(objective, n_trials=len(PLANTED))
    return [t.state.name for t in study.trials]


def test_first_rung_at_epoch_1_prunes_the_best_on_a_flat_start(tmp_path):
    states = run_planted(tmp_path, min_epochs=1)
    assert states[4] == "PRUNED"  # the best curve, stopped on its epoch-1 value (0.009, below 0.010 and 0.011)


def test_a_later_first_rung_keeps_the_best(tmp_path):
    states = run_planted(tmp_path, min_epochs=2)
    assert states[4] == "COMPLETE" and "PRUNED" in states  # still prunes, at epoch 2


def test_min_epochs_is_checked_against_the_budget(tmp_path):
    assert options(tmp_path, budget_epochs=8, min_epochs=3).min_epochs == 3
    assert options(tmp_path).min_epochs == 1  # the default: Optuna's and ASHA's first rung
    with pytest.raises(TuneError, match=r"--min-epochs 9: the pruner's first rung must be between 1 and the "
                                        r"budget \(8 epochs\)"):
        options(tmp_path, budget_epochs=8, min_epochs=9)
    with pytest.raises(TuneError, match=r"--min-epochs 0: .* \(32 epochs\)"):  # the config's max_epochs
        options(tmp_path, min_epochs=0)
