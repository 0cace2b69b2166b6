"""Hyper-parameter search (``tools/tune.py``, ``oars.Model.tune``): a YAML search space over config keys, trials
run through the training pipeline and stopped early by a pruner, on Optuna (one machine, a study in SQLite or a
journal file, resumable) or Ray Tune (Optuna's sampler + ASHA, on a Ray cluster)."""

from oars.pipelines.tune.options import TuneError, TuneOptions, resolve_options
from oars.pipelines.tune.run import tune
from oars.pipelines.tune.space import SearchSpace, SearchSpaceError, load_space

__all__ = ["SearchSpace", "SearchSpaceError", "TuneError", "TuneOptions", "load_space", "resolve_options", "tune"]
