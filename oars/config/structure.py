"""The shape of the sections a run builds: a mapping where a mapping is built, a list where a list is
iterated, and a ``type`` wherever a registry builds the dict.

Without these checks the builder fails on the wrong shape with Python's words: an optimizer given as a
list ends in ``'list' object has no attribute 'get'``, a pipeline given as a mapping in "transform must be
a callable object or dict, but got <class 'str'>" (its keys were iterated), a dict without ``type`` in
``KeyError: 'type'``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from oars.config.registry_map import Path_, _is_pipeline_key, registry_kind
from oars.config.values import Describe, optimizer_nodes

# Shown in full when a registry has at most this many names; otherwise the first ones and a count.
_MAX_LISTED = 20
_MODEL_PARTS = ("backbone", "neck", "decode_head", "auxiliary_head", "rpn_head", "roi_head", "bbox_head", "head")
# A model part's valid types are the model classes from modules of that role (``*.backbones.*``, ...).
_PART_MODULES = {"model": ("detectors", "segmentors", "recognizers", "gans"), "backbone": ("backbones",),
                 "neck": ("necks",), "head": ("heads",)}


def _part_names(path: Path_, names: Mapping[str, Any]) -> list[str]:
    """The names in ``names`` (name -> class) that fit the model part at ``path``; all of them otherwise."""
    part = "model" if path == ("model",) else next((p for p in path[1:] if isinstance(p, str)), "")
    role = _PART_MODULES.get("head" if part.endswith("head") else part)
    if path[0] != "model" or role is None:
        return list(names)
    fit = [n for n, obj in names.items() if set(str(getattr(obj, "__module__", "")).split(".")) & set(role)]
    return fit or list(names)


def _kind_name(value: Any) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"a {type(value).__name__}"


def _pipelines(value: Any, path: Path_) -> Iterator[tuple[Path_, Any]]:
    """Every ``pipeline`` / ``*_pipeline`` value with its path."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if _is_pipeline_key(key):
                yield (*path, key), item
            else:
                yield from _pipelines(item, (*path, key))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _pipelines(item, (*path, i))


def _items(value: Any, path: Path_) -> list[tuple[Path_, Any]]:
    """A section that is one dict or a list of dicts, as (path, dict) pairs."""
    if isinstance(value, (list, tuple)):
        return [((*path, i), v) for i, v in enumerate(value)]
    return [(path, value)]


def built_sections(data: Mapping) -> list[tuple[Path_, Any]]:
    """The (path, value) of every section a registry builds from a ``type``: model parts, datasets, samplers,
    transforms, optimizers, schedulers, hooks, evaluators, visualisation backends."""
    found: list[tuple[Path_, Any]] = []
    model = data.get("model")
    if model is not None:
        found.append((("model",), model))
        if isinstance(model, Mapping):
            for part in _MODEL_PARTS:
                if model.get(part) is not None:
                    found += _items(model[part], ("model", part))
    for key, loader in data.items():
        if isinstance(key, str) and key.endswith("_dataloader") and isinstance(loader, Mapping):
            for part in ("dataset", "sampler", "batch_sampler"):
                if loader.get(part) is not None:
                    found.append(((key, part), loader[part]))
        if isinstance(key, str) and key.endswith("_evaluator") and data[key] is not None:
            found += _items(data[key], (key,))
    for path, pipeline in _pipelines(data, ()):
        if isinstance(pipeline, (list, tuple)):
            found += [((*path, i), t) for i, t in enumerate(pipeline)]
    found += optimizer_nodes(data.get("optim_wrapper"))
    if data.get("param_scheduler") is not None:
        found += _items(data["param_scheduler"], ("param_scheduler",))
    if isinstance(data.get("custom_hooks"), (list, tuple)):
        found += _items(data["custom_hooks"], ("custom_hooks",))
    if isinstance(data.get("default_hooks"), Mapping):
        found += [(("default_hooks", k), h) for k, h in data["default_hooks"].items() if h is not None]
    visualizer = data.get("visualizer")
    backends = visualizer.get("vis_backends") if isinstance(visualizer, Mapping) else None
    if isinstance(backends, (list, tuple)):
        found += _items(backends, ("visualizer", "vis_backends"))
    return found


def _shape_problems(data: Mapping, describe: Describe) -> list[str]:
    problems = []
    wrapper = data.get("optim_wrapper")
    if isinstance(wrapper, Mapping) and "optimizer" in wrapper and not isinstance(wrapper["optimizer"], Mapping):
        where, key = describe(("optim_wrapper", "optimizer"))
        problems.append(f"{where}: {key}: expected one optimizer, a mapping such as {{type: AdamW, lr: 0.001}}, "
                        f"got {_kind_name(wrapper['optimizer'])} ({wrapper['optimizer']!r}); several optimizers "
                        "(one per model part) are a mapping of wrappers, each with its own optimizer")
    for path, pipeline in _pipelines(data, ()):
        if pipeline is not None and not isinstance(pipeline, (list, tuple)):
            where, key = describe(path)
            problems.append(f"{where}: {key}: expected a list of transforms (each a mapping with a 'type', e.g. "
                            f"- {{type: LoadImageFromFile}}), got {_kind_name(pipeline)} ({pipeline!r})")
    for key, loader in data.items():
        if (isinstance(key, str) and key.endswith("_dataloader") and loader is not None
                and not isinstance(loader, Mapping)):
            where, text = describe((key,))
            problems.append(f"{where}: {text}: expected a mapping (batch_size, num_workers, dataset, ...), "
                            f"got {_kind_name(loader)} ({loader!r})")
    return problems


def structure_problems(data: Mapping, describe: Describe,
                       names_for: Callable[[str, str | None], tuple[dict[str, Any], str]]) -> list[str]:
    """Messages for sections of the wrong shape and built sections without a ``type``.

    Args:
        data: the plain config dict.
        describe: key path -> (file that set it, key text).
        names_for: (registry kind, scope) -> (the names a ``type`` may take there with their classes, the
            ``--list`` argument).
    """
    problems = _shape_problems(data, describe)
    scope = data.get("default_scope") if isinstance(data.get("default_scope"), str) else None
    for path, node in built_sections(data):
        if not isinstance(node, Mapping):
            if path[-1] != "optimizer" and not _is_pipeline_key(path[-1]):  # wrong shapes are reported above
                where, key = describe(path)
                problems.append(f"{where}: {key}: expected a mapping with a 'type' (the class to build), got "
                                f"{_kind_name(node)} ({node!r})")
            continue
        if "type" in node or (path[0].endswith("_evaluator") and "metrics" in node):
            continue
        kind = registry_kind(path, {**node, "type": None})
        if kind is None:
            continue
        node_scope = node.get("_scope_") if isinstance(node.get("_scope_"), str) else scope
        registered, list_arg = names_for(kind, node_scope)
        names = _part_names(path, registered)
        shown = ", ".join(names[:_MAX_LISTED])
        more = f", ... ({len(names)} in all)" if len(names) > _MAX_LISTED else ""
        where, key = describe(path)
        given = f" (it has {', '.join(map(str, node))})" if node else ""
        problems.append(f"{where}: {key}: a 'type' is needed to say which class to build, but there is none{given}. "
                        f"Valid types: {shown}{more}; list them with `python -m oars.config.check --list "
                        f"{list_arg}{' --scope ' + node_scope if node_scope else ''}`")
    return problems
