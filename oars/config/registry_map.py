"""Where a typed dict sits decides which registry builds it: ``model.**`` -> MODELS,
``*_dataloader.dataset`` -> DATASETS, ``*pipeline[i]`` -> TRANSFORMS, ...

This mirrors how mmengine's runner builds each part of a config, and is kept as one table-like
module so adding a new config section means editing one place.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from oars.config.provenance import join_key

Path_ = tuple  # key path as a tuple of str keys and int list indices

# Layer specs inside models (``norm: {type: GN, num_groups: 16}``) name entries of a table in
# oars.models.layers, not registered classes.
_LAYER_KEYS = {"norm": "layer:norm", "norm_cfg": "layer:norm", "act": "layer:activation", "act_cfg": "layer:activation"}
_LAYER_TABLES = {
    "layer:norm": ("oars.models.layers.norm", "NORM_LAYERS"),
    "layer:activation": ("oars.models.layers.activation", "ACT_LAYERS"),
}
# Parts a head builds through TASK_UTILS (assigners, samplers, box coders, anchor generators, video consensus
# modules), and keys whose ``type`` names an op the owning module resolves itself (``roi_layer: {type: RoIAlign}``).
_TASK_UTIL_KEYS = {"assigner", "sampler", "bbox_coder", "anchor_generator", "prior_generator", "consensus"}
_OWNER_CHECKED_KEYS = {"roi_layer", "nms"}
_DATASET_KEYS = {"dataset", "datasets"}
_TOP_LEVEL = {
    "visualizer": "VISUALIZERS",
    "log_processor": "LOG_PROCESSORS",
    "model_wrapper_cfg": "MODEL_WRAPPERS",
    "train_cfg": "LOOPS",
    "val_cfg": "LOOPS",
    "test_cfg": "LOOPS",
}


def _key_text(path: Path_) -> str:
    text = ""
    for part in path:
        text = join_key(text, part)
    return text


def _is_index(part: Any) -> bool:
    return isinstance(part, int) and not isinstance(part, bool)


def _is_pipeline_key(part: Any) -> bool:
    return isinstance(part, str) and (part == "pipeline" or part.endswith("_pipeline"))


def registry_kind(path: Path_, node: Mapping) -> str | None:
    """The mmengine registry constant (``"MODELS"``, ...) a typed dict at ``path`` is built from.

    ``"layer:norm"`` / ``"layer:activation"`` for layer specs inside a model (checked against tables).

    ``None`` where no registry is known, e.g. albumentations names nested inside an ``Albu``
    transform: the transform that owns them checks those itself.
    """
    if not path or not isinstance(path[0], str):
        return None
    top, rest = path[0], path[1:]
    if top in ("model", "tta_model"):
        if "init_cfg" in rest:
            return "WEIGHT_INITIALIZERS"
        if rest and rest[-1] in _OWNER_CHECKED_KEYS:
            return None
        if rest and rest[-1] in _TASK_UTIL_KEYS:
            return "TASK_UTILS"
        return _LAYER_KEYS.get(rest[-1], "MODELS") if rest else "MODELS"
    for i, part in enumerate(path):
        if _is_pipeline_key(part):  # pipeline[i] is a transform; anything deeper belongs to it
            return "TRANSFORMS" if len(path) == i + 2 and _is_index(path[i + 1]) else None
    if top.endswith("_dataloader"):
        if rest and rest[0] == "dataset" and all(p in _DATASET_KEYS or _is_index(p) for p in rest):
            return "DATASETS"
        if rest in (("sampler",), ("batch_sampler",)):
            return "DATA_SAMPLERS"
        return "FUNCTIONS" if rest == ("collate_fn",) else None
    if top.endswith("_evaluator"):
        if not rest:
            return "EVALUATOR" if "metrics" in node else "METRICS"
        if (len(rest) == 1 and _is_index(rest[0])) or (rest[0] == "metrics" and len(rest) <= 2):
            return "METRICS"
        return None
    if top == "custom_hooks":
        return "HOOKS" if len(rest) == 1 and _is_index(rest[0]) else None
    if top == "default_hooks":
        return "HOOKS" if len(rest) == 1 else None
    if top == "optim_wrapper":  # a wrapper, or a dict of wrappers (GANs); each has an optimizer
        if rest and rest[-1] == "optimizer" and len(rest) <= 2:
            return "OPTIMIZERS"
        return "OPTIM_WRAPPERS" if len(rest) <= 1 else None
    if top == "param_scheduler":
        return "PARAM_SCHEDULERS" if not rest or (len(rest) == 1 and _is_index(rest[0])) else None
    if top == "visualizer" and len(rest) == 2 and rest[0] == "vis_backends" and _is_index(rest[1]):
        return "VISBACKENDS"
    return _TOP_LEVEL.get(top) if not rest else None


def _typed_nodes(value: Any, path: Path_, scope: str | None) -> Iterator[tuple[Path_, dict, str | None]]:
    """Every dict with a ``type`` key, with its path and the scope it is built in."""
    if isinstance(value, Mapping):
        scope = value.get("_scope_", scope) if isinstance(value.get("_scope_"), str) else scope
        if "type" in value:
            yield path, value, scope
        for key, item in value.items():
            yield from _typed_nodes(item, (*path, key), scope)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _typed_nodes(item, (*path, i), scope)
