"""Registries of the extra test task, scope ``oddtask`` (children of the oars core's; the core's locations are
included by :func:`oars.registry.task_registries`, DESIGN.md §3)."""

from oars.registry import task_registries

SCOPE = "oddtask"

_R = task_registries(
    SCOPE,
    {
        "model": ["extra_task.models"],
        "dataset": ["extra_task.datasets"],
        "transform": ["extra_task.datasets"],
        "metric": ["extra_task.evaluation"],
    },
)
MODELS = _R["MODELS"]
DATASETS = _R["DATASETS"]
TRANSFORMS = _R["TRANSFORMS"]
METRICS = _R["METRICS"]
