"""Registries of the video task (children of the oars core's)."""

from oars.registry import task_registries

_R = task_registries(
    "video",
    {
        "model": ["video.models"],
        "dataset": ["video.datasets"],
        "transform": ["video.transforms", "video.datasets"],
        "metric": ["video.evaluation"],
        "hook": ["video.engine"],
        "task util": ["video.models"],
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
