"""Registries of the detection task (children of the oars core's)."""

from oars.registry import task_registries

_R = task_registries(
    "detection",
    {
        "model": ["detection.models"],
        "dataset": ["detection.datasets"],
        "transform": ["detection.transforms"],
        "metric": ["detection.evaluation"],
        "hook": ["detection.engine"],
        "task util": ["detection.models"],
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
