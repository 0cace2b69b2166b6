"""Scoped registries of the oars core.

Every registry is a child of mmengine's root registry of the same kind, so the
mmengine Runner finds our classes through ``default_scope``. Task packages
(``detection``, ``segmentation``, ...) create children of these in their own
``registry.py``; those must list the core's ``locations`` too, because
``Registry.get`` imports only its own locations before asking the parent.
"""

from __future__ import annotations

from mmengine.registry import DATA_SAMPLERS as MMENGINE_DATA_SAMPLERS
from mmengine.registry import DATASETS as MMENGINE_DATASETS
from mmengine.registry import EVALUATOR as MMENGINE_EVALUATOR
from mmengine.registry import FUNCTIONS as MMENGINE_FUNCTIONS
from mmengine.registry import HOOKS as MMENGINE_HOOKS
from mmengine.registry import LOG_PROCESSORS as MMENGINE_LOG_PROCESSORS
from mmengine.registry import LOOPS as MMENGINE_LOOPS
from mmengine.registry import METRICS as MMENGINE_METRICS
from mmengine.registry import MODEL_WRAPPERS as MMENGINE_MODEL_WRAPPERS
from mmengine.registry import MODELS as MMENGINE_MODELS
from mmengine.registry import OPTIM_WRAPPER_CONSTRUCTORS as MMENGINE_OPTIM_WRAPPER_CONSTRUCTORS
from mmengine.registry import OPTIM_WRAPPERS as MMENGINE_OPTIM_WRAPPERS
from mmengine.registry import OPTIMIZERS as MMENGINE_OPTIMIZERS
from mmengine.registry import PARAM_SCHEDULERS as MMENGINE_PARAM_SCHEDULERS
from mmengine.registry import RUNNERS as MMENGINE_RUNNERS
from mmengine.registry import TASK_UTILS as MMENGINE_TASK_UTILS
from mmengine.registry import TRANSFORMS as MMENGINE_TRANSFORMS
from mmengine.registry import VISBACKENDS as MMENGINE_VISBACKENDS
from mmengine.registry import VISUALIZERS as MMENGINE_VISUALIZERS
from mmengine.registry import WEIGHT_INITIALIZERS as MMENGINE_WEIGHT_INITIALIZERS
from mmengine.registry import Registry

from oars.tasks import TASKS as TASKS  # the task contracts (oars.tasks, DESIGN §9), beside the scoped registries

CORE_LOCATIONS = {
    # PrunedModel, QATModel, DistillModel (+ its losses): the config types of oars.compress's variants
    "model": ["oars.models", "oars.compress.pruned_model", "oars.compress.qat_model", "oars.compress.distill_model"],
    "dataset": ["oars.data"],
    "transform": ["oars.data"],
    "metric": ["oars.evaluation"],
    "hook": ["oars.engine", "oars.data"],  # oars.data: ShardSamplerHook (streamed shards' epochs and resume)
    "optim_wrapper": ["oars.engine"],
    "visualizer": ["oars.visualization"],
    "vis_backend": ["oars.visualization.tracking_backends"],  # the experiment trackers' backends (--logger)
    "function": ["oars.data"],
    "data sampler": ["oars.data.samplers"],  # ClassAwareSampler, usable by every task's configs
}


def _child(name: str, parent: Registry, scope: str, kind: str | None = None, extra: list[str] | None = None):
    """A child registry whose locations include the core's (the mmengine `locations` trap)."""
    locations = list(CORE_LOCATIONS.get(kind or name, [])) + list(extra or [])
    return Registry(name, parent=parent, scope=scope, locations=locations)


MODELS = _child("model", MMENGINE_MODELS, "oars")
DATASETS = _child("dataset", MMENGINE_DATASETS, "oars")
TRANSFORMS = _child("transform", MMENGINE_TRANSFORMS, "oars")
METRICS = _child("metric", MMENGINE_METRICS, "oars")
EVALUATOR = _child("evaluator", MMENGINE_EVALUATOR, "oars")
HOOKS = _child("hook", MMENGINE_HOOKS, "oars")
OPTIM_WRAPPERS = _child("optim_wrapper", MMENGINE_OPTIM_WRAPPERS, "oars")
OPTIM_WRAPPER_CONSTRUCTORS = _child("optimizer wrapper constructor", MMENGINE_OPTIM_WRAPPER_CONSTRUCTORS, "oars")
OPTIMIZERS = _child("optimizer", MMENGINE_OPTIMIZERS, "oars")
PARAM_SCHEDULERS = _child("parameter scheduler", MMENGINE_PARAM_SCHEDULERS, "oars")
DATA_SAMPLERS = _child("data sampler", MMENGINE_DATA_SAMPLERS, "oars")
LOOPS = _child("loop", MMENGINE_LOOPS, "oars")
RUNNERS = _child("runner", MMENGINE_RUNNERS, "oars")
MODEL_WRAPPERS = _child("model_wrapper", MMENGINE_MODEL_WRAPPERS, "oars")
LOG_PROCESSORS = _child("log_processor", MMENGINE_LOG_PROCESSORS, "oars")
VISUALIZERS = _child("visualizer", MMENGINE_VISUALIZERS, "oars")
VISBACKENDS = _child("vis_backend", MMENGINE_VISBACKENDS, "oars")
WEIGHT_INITIALIZERS = _child("weight initializer", MMENGINE_WEIGHT_INITIALIZERS, "oars")
FUNCTIONS = _child("function", MMENGINE_FUNCTIONS, "oars")
# Parts a config swaps inside a head (assigners, samplers, box coders, anchor generators), as MMDetection's.
TASK_UTILS = _child("task util", MMENGINE_TASK_UTILS, "oars")

ALL_REGISTRIES = {
    "MODELS": MODELS,
    "DATASETS": DATASETS,
    "TRANSFORMS": TRANSFORMS,
    "METRICS": METRICS,
    "EVALUATOR": EVALUATOR,
    "HOOKS": HOOKS,
    "OPTIM_WRAPPERS": OPTIM_WRAPPERS,
    "OPTIM_WRAPPER_CONSTRUCTORS": OPTIM_WRAPPER_CONSTRUCTORS,
    "OPTIMIZERS": OPTIMIZERS,
    "PARAM_SCHEDULERS": PARAM_SCHEDULERS,
    "DATA_SAMPLERS": DATA_SAMPLERS,
    "LOOPS": LOOPS,
    "RUNNERS": RUNNERS,
    "MODEL_WRAPPERS": MODEL_WRAPPERS,
    "LOG_PROCESSORS": LOG_PROCESSORS,
    "VISUALIZERS": VISUALIZERS,
    "VISBACKENDS": VISBACKENDS,
    "WEIGHT_INITIALIZERS": WEIGHT_INITIALIZERS,
    "FUNCTIONS": FUNCTIONS,
    "TASK_UTILS": TASK_UTILS,
}


def task_registries(scope: str, task_locations: dict[str, list[str]]) -> dict[str, Registry]:
    """Build a task's child registries (one per core registry) in one place.

    ``task_locations`` maps a registry kind ("model", "dataset", ...) to the task's
    modules that register into it; the core's locations are always included.
    """
    out = {}
    for const, parent in ALL_REGISTRIES.items():
        kind = parent.name
        out[const] = _child(kind, parent, scope, kind=kind, extra=task_locations.get(kind, []))
    return out
