"""Registries of the segmentation task (children of the oars core's)."""

from oars.registry import task_registries

_R = task_registries(
    "segmentation",
    {
        "model": ["segmentation.models"],
        "dataset": ["segmentation.datasets"],
        "transform": ["segmentation.transforms"],
        "metric": ["segmentation.evaluation"],
        "hook": ["segmentation.engine"],
    },
)
MODELS = _R["MODELS"]
DATASETS = _R["DATASETS"]
TRANSFORMS = _R["TRANSFORMS"]
METRICS = _R["METRICS"]
HOOKS = _R["HOOKS"]
VISUALIZERS = _R["VISUALIZERS"]
OPTIM_WRAPPERS = _R["OPTIM_WRAPPERS"]
