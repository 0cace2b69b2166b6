"""A hyper-parameter search on one machine with Optuna: trials run through the training pipeline, a pruner stops
the hopeless ones at each validation, and the study lives in SQLite or a journal file, so it needs no server and
a re-run of the same command continues it.

Resuming after a kill: a trial that was running when its process died (or was interrupted with Ctrl-C) is marked
failed and enqueued again with the same values and the same work dir, which then resumes from its last
checkpoint. Nothing is trained twice and no trial is lost; the failed record stays in the study, and the trial
that replaced it names it (user attribute ``retry_of``).
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any

from oars.engine.run_errors import TrainingInterrupted
from oars.engine.work_dir import latest_checkpoint
from oars.errors import OarsError
from oars.extras import require_extra
from oars.pipelines.train import train
from oars.pipelines.tune.options import TuneError, TuneOptions, trial_dir
from oars.pipelines.tune.space import Param, SearchSpace
from oars.pipelines.tune.trial_hook import TrialReportHook

HOST = socket.gethostname()


def open_storage(url: str) -> Any:
    """Optuna's storage for ``url``: ``sqlite:///path.db`` (any SQLAlchemy URL) or ``journal:path.log`` (a
    journal file, for file systems where SQLite's locks are unreliable, e.g. NFS)."""
    optuna = require_extra("optuna", "tools/tune.py")
    if url.startswith("journal:"):
        from optuna.storages.journal import JournalFileBackend, JournalStorage

        path = url[len("journal:"):]
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        return JournalStorage(JournalFileBackend(path))
    if url.startswith("sqlite:///"):
        os.makedirs(os.path.dirname(os.path.abspath(url[len("sqlite:///"):])), exist_ok=True)
    try:
        return optuna.storages.RDBStorage(url)
    except Exception as err:  # SQLAlchemy's many errors for a bad URL or an unreadable file
        raise TuneError(f"--storage {url}: cannot open it ({type(err).__name__}: {err}); expected "
                        "sqlite:///path/study.db or journal:path/study.log") from None


def _encoded(param: Param) -> bool:
    """Whether a choice's values go through JSON (Optuna's categorical values must be scalars)."""
    return any(not isinstance(v, (str, int, float, bool, type(None))) for v in param.values)


def suggest(trial: Any, space: SearchSpace) -> dict[str, Any]:
    """The trial's value of each searched key (Optuna's ``suggest_*``; list choices travel as JSON)."""
    values: dict[str, Any] = {}
    for p in space.params:
        if p.kind == "float":
            values[p.key] = trial.suggest_float(p.key, p.low, p.high, log=p.log, step=p.step)
        elif p.kind == "int":
            values[p.key] = trial.suggest_int(p.key, int(p.low), int(p.high), log=p.log, step=int(p.step or 1))
        elif _encoded(p):
            values[p.key] = json.loads(trial.suggest_categorical(p.key, [json.dumps(v) for v in p.values]))
        else:
            values[p.key] = trial.suggest_categorical(p.key, list(p.values))
    return values


def decoded_params(space: SearchSpace, params: dict[str, Any]) -> dict[str, Any]:
    """A finished trial's stored params as config values (JSON-encoded choices decoded), in space order."""
    by_key = {p.key: p for p in space.params}
    return {k: json.loads(v) if k in by_key and by_key[k].kind == "choice" and _encoded(by_key[k]) else v
            for k, v in params.items()}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _check_study(study: Any, options: TuneOptions) -> None:
    """Refuse a storage that holds this study name for another config, space, metric or direction."""
    attrs = study.user_attrs
    mine = {"config": options.config, "space": options.space.fingerprint(), "metric": options.metric,
            "direction": options.direction}
    if not attrs:
        for key, value in mine.items():
            study.set_user_attr(key, value)
        return
    differ = [k for k, v in mine.items() if attrs.get(k) != v]
    if differ:
        shown = "; ".join(f"{k}: stored {attrs.get(k)!r}, now {mine[k]!r}" for k in differ if k != "space")
        if "space" in differ:
            shown = "; ".join(filter(None, [shown, "the search space differs"]))
        raise TuneError(f"--storage {options.storage}: study {options.study_name!r} belongs to another search "
                        f"({shown}); give another --study-name or --work-dir to start a new one")


def requeue_unfinished(study: Any, storage: Any, options: TuneOptions) -> list[int]:
    """Enqueue again every trial of this machine that did not finish: running in a process that is gone (killed),
    or failed by an interruption. Returns the numbers of the trials requeued."""
    from optuna.trial import TrialState

    retried = {t.user_attrs.get("retry_of") for t in study.trials}
    requeued = []
    for t in study.trials:
        if t.number in retried or t.user_attrs.get("host") != HOST:
            continue
        dead = t.state == TrialState.RUNNING and not _pid_alive(int(t.user_attrs.get("pid", -1)))
        interrupted = t.state == TrialState.FAIL and t.user_attrs.get("interrupted")
        if not (dead or interrupted):
            continue
        study_id = storage.get_study_id_from_name(options.study_name)
        trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, t.number)
        if dead:
            storage.set_trial_state_values(trial_id, TrialState.FAIL)
        study.enqueue_trial(t.params, user_attrs={"retry_of": t.number, "work_dir": t.user_attrs["work_dir"]})
        requeued.append(t.number)
    return requeued


def finished_count(study: Any) -> int:
    """Completed plus pruned trials: what ``--trials`` counts."""
    from optuna.trial import TrialState

    return sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in study.trials)


def _pruner(options: TuneOptions) -> Any:
    import optuna

    if options.pruner == "none":
        return optuna.pruners.NopPruner()
    if options.pruner == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=options.min_epochs,
                                              max_resource=options.budget_epochs or "auto")
    return optuna.pruners.SuccessiveHalvingPruner(min_resource=options.min_epochs, reduction_factor=3)


def _objective(options: TuneOptions, study: Any) -> Any:
    import optuna

    def objective(trial: Any) -> float:
        params = suggest(trial, options.space)
        work_dir = trial.user_attrs.get("work_dir") or trial_dir(options, f"trial_{trial.number:03d}")
        for key, value in (("work_dir", work_dir), ("host", HOST), ("pid", os.getpid())):
            trial.set_user_attr(key, value)
        resume = "retry_of" in trial.user_attrs and _has_checkpoint(work_dir)
        if not resume and _has_checkpoint(work_dir):  # another study's trial: never resumed or deleted unasked
            raise TuneError(f"{work_dir} holds checkpoints of a trial this study did not run (the storage "
                            f"{options.storage} does not know it); give another --work-dir, or delete the folder")
        best: list[float] = []

        def report(value: float, step: int) -> None:
            best.append(value)
            trial.report(value, step)
            if trial.should_prune():
                raise optuna.TrialPruned(f"{options.metric} = {value:.4f} after {step} epochs")

        hook = TrialReportHook(options.metric, report, options.config)
        try:
            train(options.config, options.trial_overrides(params), work_dir=work_dir, resume=resume or None,
                  overwrite=not resume, loggers=options.loggers, hooks=[hook])
        except TrainingInterrupted:
            trial.set_user_attr("interrupted", True)
            raise
        if not best:
            raise TuneError(f"{options.config}: trial {trial.number} finished without a validation; the search "
                            "needs val_dataloader, val_evaluator and val_cfg")
        pick = max if options.direction == "maximize" else min
        return pick(best)

    return objective


def _has_checkpoint(work_dir: str) -> bool:
    if not os.path.isdir(work_dir):
        return False
    try:
        return latest_checkpoint(work_dir) is not None
    except OarsError:
        return False


def run_study(options: TuneOptions, progress: Any = print) -> Any:
    """Run (or continue) the study until it holds ``options.trials`` finished trials; returns the Optuna study.

    Raises:
        TuneError: a storage that belongs to another search; a trial without validation.
        OarsError: a trial's own error (a bad override, a metric the evaluator does not report), after the trial
            is recorded as failed.
    """
    optuna = require_extra("optuna", "tools/tune.py")
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # a failed trial: our one-line message, not its traceback
    storage = open_storage(options.storage)
    study = optuna.create_study(study_name=options.study_name, storage=storage, direction=options.direction,
                                pruner=_pruner(options), load_if_exists=True)
    _check_study(study, options)
    # the seed moves on with the study: a continued study seeded as at its start would draw its first values again
    study.sampler = optuna.samplers.TPESampler(seed=options.seed + len(study.trials))
    for number in requeue_unfinished(study, storage, options):
        progress(f"trial {number} did not finish: it runs again from its last checkpoint")
    objective = _objective(options, study)
    while finished_count(study) < options.trials:
        progress(f"trial {len(study.trials)}: {finished_count(study)} of {options.trials} trials finished")
        study.optimize(objective, n_trials=1, catch=())
    return study
