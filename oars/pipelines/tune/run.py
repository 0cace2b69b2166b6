"""One entry for a search, whichever engine runs it: resolve the options against the config, run the trials
(:mod:`oars.pipelines.tune.study` on Optuna, :mod:`oars.pipelines.tune.ray_search` on Ray Tune), then write the
summary (:mod:`oars.pipelines.tune.summary`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from oars.config.check import load_checked_config
from oars.pipelines.tune.options import resolve_options
from oars.pipelines.tune.space import load_space
from oars.pipelines.tune.summary import TrialRecord, print_table, write_summary


def optuna_records(study: Any) -> list[TrialRecord]:
    """The study's trials as summary records (each trial's best reported value; a pruned one's last report)."""
    records = []
    for t in study.trials:
        steps = len(t.intermediate_values)
        value = t.value if t.value is not None else (t.intermediate_values[max(t.intermediate_values)]
                                                     if t.intermediate_values else None)
        records.append(TrialRecord(t.number, t.state.name, value, dict(t.params), steps,
                                   t.user_attrs.get("work_dir", "")))
    return records


def _importance(study: Any) -> dict[str, float] | None:
    """Optuna's importance of the searched keys (its default evaluator; None with fewer than two completed
    trials or when every trial measured the same)."""
    import warnings

    import optuna
    from optuna.trial import TrialState

    if sum(t.state == TrialState.COMPLETE for t in study.trials) < 2:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "importances will be equal": the report says so
            return optuna.importance.get_param_importances(study)
    except (RuntimeError, ValueError):  # a single value for every trial: nothing to attribute
        return None


def tune(config: str, space: str, *, trials: int, metric: str | None = None, direction: str | None = None,
         budget_epochs: int | None = None, work_dir: str | None = None, storage: str | None = None,
         study_name: str | None = None, overrides: Sequence[str] = (), seed: int = 0, pruner: str = "halving",
         loggers: Sequence[str] = (), ray: bool = False, ray_address: str | None = None,
         progress: Callable[[str], Any] = print, min_epochs: int = 1) -> dict[str, Any]:
    """Search ``space`` over ``config`` until the study holds ``trials`` finished trials.

    Args:
        config: the config file. space: the search-space YAML file (:mod:`oars.pipelines.tune.space`).
        trials: completed + pruned trials to reach (a re-run continues a study). metric / direction: the
            validation metric and ``max``/``min`` (default: the config's ``save_best`` and ``rule``).
        budget_epochs: epochs per trial. work_dir: the study's folder (default ``work_dirs/tune/<config>``).
        storage: Optuna's storage URL (default ``sqlite:///<work_dir>/study.db``). overrides: ``-o`` for every
            trial. pruner: ``halving`` (successive halving; ASHA on Ray), ``hyperband`` or ``none``.
        min_epochs: the pruner's first rung (no trial stopped before this many validations; default 1).
        ray / ray_address: run the trials on Ray Tune (a local Ray, or the cluster at the address).

    Returns:
        ``{'best': TrialRecord | None, 'best_yaml', 'report', 'trials'}`` (paths of the written files).
    """
    cfg = load_checked_config(config, overrides)
    options = resolve_options(cfg, config, load_space(space), trials=trials, metric=metric, direction=direction,
                              budget_epochs=budget_epochs, work_dir=work_dir, storage=storage, study_name=study_name,
                              overrides=overrides, seed=seed, pruner=pruner, loggers=loggers,
                              min_epochs=min_epochs)
    os.makedirs(options.work_dir, exist_ok=True)
    if ray:
        from oars.pipelines.tune.ray_search import run_ray_search

        records, importance, engine = run_ray_search(options, address=ray_address, progress=progress), None, "Ray Tune"
    else:
        from oars.pipelines.tune.study import decoded_params, run_study

        study = run_study(options, progress=progress)
        records = [TrialRecord(r.number, r.state, r.value, decoded_params(options.space, r.params), r.steps,
                               r.work_dir) for r in optuna_records(study)]
        importance, engine = _importance(study), "Optuna"
    summary = write_summary(options, records, importance, engine)
    print_table(records, options, summary["best"], progress)
    progress(f"wrote {summary['trials']} and {summary['report']}"
             + (f"; the best trial's config: {summary['best_yaml']}" if summary["best_yaml"] else ""))
    return summary
