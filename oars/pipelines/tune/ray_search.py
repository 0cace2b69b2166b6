"""The same search on a Ray cluster: Ray Tune runs the trials (Optuna's TPE as its search algorithm, ASHA as its
scheduler: the asynchronous successive halving that stops the weak trials at each rung), each trial an ordinary
run of the training pipeline in ``<study>/trial_<id>/``.

Resuming: Ray Tune keeps the experiment's state in ``<study>/ray/<study name>``; a re-run of the same command
restores it (``Tuner.restore``, unfinished and errored trials resumed), and each resumed trial continues from the
checkpoint in its work dir.
"""

from __future__ import annotations

import json
import os
import os.path as osp
from collections.abc import Callable
from typing import Any

from oars.engine.work_dir import latest_checkpoint
from oars.errors import OarsError
from oars.extras import require_extra
from oars.pipelines.tune.options import TuneError, TuneOptions, trial_dir
from oars.pipelines.tune.space import Param
from oars.pipelines.tune.summary import TrialRecord

ENCODED = "__json__"  # prefix of a choice value that travels as JSON (Optuna's categorical values are scalars)


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool, type(None)))


def ray_param(param: Param) -> Any:
    """Ray Tune's search-space object for one key (``int`` ranges inclusive, as in Optuna)."""
    from ray import tune

    if param.kind == "choice":
        return tune.choice([v if _is_scalar(v) else ENCODED + json.dumps(v) for v in param.values])
    low, high = param.low, param.high
    if param.kind == "float":
        if param.log:
            return tune.loguniform(low, high)
        return tune.quniform(low, high, param.step) if param.step else tune.uniform(low, high)
    if param.log:
        return tune.lograndint(int(low), int(high) + 1)
    return tune.qrandint(int(low), int(high), int(param.step or 1))


def decode(params: dict[str, Any]) -> dict[str, Any]:
    """A trial's Ray config as config values (JSON-encoded choices decoded)."""
    return {k: json.loads(v[len(ENCODED):]) if isinstance(v, str) and v.startswith(ENCODED) else v
            for k, v in params.items()}


def _trainable(params: dict[str, Any], options: TuneOptions, cwd: str) -> None:
    """One trial inside a Ray worker: the training pipeline with a hook reporting to Ray Tune."""
    from ray import tune

    from oars.pipelines.train import train
    from oars.pipelines.tune.trial_hook import TrialReportHook

    os.chdir(cwd)  # relative data paths in the config are the user's folder's, wherever Ray starts the worker
    work_dir = trial_dir(options, f"trial_{tune.get_context().get_trial_id()}")
    try:
        resume = osp.isdir(work_dir) and latest_checkpoint(work_dir) is not None
    except OarsError:
        resume = False

    def report(value: float, step: int) -> None:
        tune.report({options.metric: value, "epoch": step, "work_dir": work_dir})

    hook = TrialReportHook(options.metric, report, options.config)
    train(options.config, options.trial_overrides(decode(params)), work_dir=work_dir, resume=resume or None,
          overwrite=not resume, loggers=options.loggers, hooks=[hook])


def _records(results: Any, options: TuneOptions) -> list[TrialRecord]:
    records = []
    for number, result in enumerate(results):
        history = result.metrics_dataframe
        values = [] if history is None or options.metric not in history else history[options.metric].dropna().tolist()
        steps = len(values)
        if result.error is not None:
            state = "FAIL"
        elif options.budget_epochs is not None and steps < options.budget_epochs:
            state = "PRUNED"  # ASHA stopped it at a rung
        else:
            state = "COMPLETE"
        pick = max if options.direction == "maximize" else min
        params = decode({k: v for k, v in (result.config or {}).items()})
        work_dir = (result.metrics or {}).get("work_dir", "")
        records.append(TrialRecord(number, state, pick(values) if values else None, params, steps, work_dir))
    return records


def run_ray_search(options: TuneOptions, address: str | None = None,
                   progress: Callable[[str], Any] = print) -> list[TrialRecord]:
    """Run (or restore and continue) the search on Ray Tune; returns one record per trial.

    Raises:
        TuneError: Ray or Optuna missing (the extra to install), a trial that failed (its error).
    """
    ray = require_extra("ray", "tools/tune.py --ray")
    require_extra("optuna", "tools/tune.py --ray (Optuna's sampler)")
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler
    from ray.tune.search.optuna import OptunaSearch

    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 **({} if address else {"num_cpus": os.cpu_count() or 1}))
    storage = osp.join(options.work_dir, "ray")
    path = osp.join(storage, options.study_name)
    trainable = tune.with_parameters(_trainable, options=options, cwd=os.getcwd())
    mode = "max" if options.direction == "maximize" else "min"
    if tune.Tuner.can_restore(path):
        progress(f"continuing the Ray Tune search in {path}")
        tuner = tune.Tuner.restore(path, trainable, resume_unfinished=True, resume_errored=True)
    else:
        scheduler = (None if options.pruner == "none" else
                     ASHAScheduler(time_attr="epoch", max_t=options.budget_epochs or 100,
                                   grace_period=options.min_epochs, reduction_factor=3))
        tuner = tune.Tuner(trainable, param_space={p.key: ray_param(p) for p in options.space.params},
                           tune_config=tune.TuneConfig(metric=options.metric, mode=mode,
                                                       search_alg=OptunaSearch(seed=options.seed),
                                                       scheduler=scheduler, num_samples=options.trials,
                                                       max_concurrent_trials=1),
                           run_config=tune.RunConfig(name=options.study_name, storage_path=storage, verbose=0))
    results = tuner.fit()
    errors = [r.error for r in results if r.error is not None]
    records = _records(results, options)
    if errors:
        raise TuneError(f"{len(errors)} Ray Tune trial(s) failed; the first: {errors[0]}")
    return records
