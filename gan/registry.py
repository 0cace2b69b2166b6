"""Registries of the gan task (children of the oars core's)."""

from oars.registry import task_registries

_R = task_registries(
    "gan",
    {
        "model": ["gan.models"],
        "dataset": ["gan.datasets"],
        "transform": ["gan.transforms", "gan.datasets"],
        "metric": ["gan.evaluation"],
        "hook": ["gan.engine"],
        "task util": ["gan.models"],
        "optimizer wrapper constructor": ["gan.models"],  # MultiOptimWrapperConstructor (beyond the contract)
    },
)
MODELS = _R["MODELS"]
DATASETS = _R["DATASETS"]
TRANSFORMS = _R["TRANSFORMS"]
METRICS = _R["METRICS"]
HOOKS = _R["HOOKS"]
VISUALIZERS = _R["VISUALIZERS"]
OPTIM_WRAPPERS = _R["OPTIM_WRAPPERS"]
TASK_UTILS = _R["TASK_UTILS"]
OPTIM_WRAPPER_CONSTRUCTORS = _R["OPTIM_WRAPPER_CONSTRUCTORS"]
