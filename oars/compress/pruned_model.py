"""A pruned model as an ordinary config: ``model: {type: PrunedModel, pruned_from: <the model's type>,
pruned_shapes: {...}, <the model's own arguments>}``.

Why this shape: the families' configs can express one width knob (``base_channels``), not the width of every
layer that structured pruning leaves behind. Rather than teaching every backbone, neck and head a per-layer width
list, the generated config keeps the model's own arguments and adds the layers whose shapes pruning changed.
``PrunedModel`` (registered in the core's model registry, so every task scope finds it) builds the model of
``pruned_from`` from those arguments and, right after the build and before any weights are loaded, resizes the
listed layers (:func:`apply_pruned_shapes`). What comes back is an instance of the model's own class, so its
state-dict keys, ``mode='loss'|'predict'|'tensor'``, export, inference and evaluation are untouched, and the
pruned checkpoint loads strictly.

``pruned_shapes`` maps a module path (``backbone.layer1.0.conv1``) to what pruning changed in that module:
``attrs`` (its integer attributes, e.g. ``out_channels``, ``num_features``) and ``tensors`` (the new shape of each
of its own parameters and buffers). It is written by :func:`pruned_shapes` from the model before and after
pruning, so it describes exactly what the pruner did, whatever the layer type.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from mmengine.registry import MODELS as ROOT_MODELS
from torch import nn

from oars.registry import MODELS

_SCALAR_TYPES = (int,)


def _own_tensors(module: nn.Module) -> dict[str, torch.Tensor]:
    """The module's own (non-recursive) parameters and buffers by name."""
    out = {name: p for name, p in module.named_parameters(recurse=False)}
    out.update({name: b for name, b in module.named_buffers(recurse=False) if b is not None})
    return out


def _int_attrs(module: nn.Module) -> dict[str, Any]:
    """Integer (or tuple-of-integer) attributes of a module: where layers keep their widths."""
    out = {}
    for key, value in vars(module).items():
        if key.startswith("_") or isinstance(value, bool):
            continue
        if isinstance(value, _SCALAR_TYPES):
            out[key] = value
        elif isinstance(value, tuple) and value and all(isinstance(v, int) and not isinstance(v, bool)
                                                        for v in value):
            out[key] = list(value)
    return out


def pruned_shapes(original: nn.Module, pruned: nn.Module) -> dict[str, dict[str, dict[str, Any]]]:
    """What pruning changed, per module: the ``pruned_shapes`` entry of a generated config.

    Args:
        original: the model before pruning (same class and module tree as ``pruned``).
        pruned: the model after structured pruning (tensors sliced, width attributes updated).

    Returns:
        ``{module_path: {"attrs": {name: int | list[int]}, "tensors": {name: list[int]}}}`` for every module whose
        own parameters/buffers changed shape; ``attrs`` holds the width attributes that changed with them.

    Raises:
        ValueError: the two models do not have the same modules (not a pruned copy).
    """
    before = dict(original.named_modules())
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for path, module in pruned.named_modules():
        if path not in before or type(before[path]) is not type(module):
            raise ValueError(f"pruned_shapes: module {path!r} differs between the original and the pruned model")
        old, new = _own_tensors(before[path]), _own_tensors(module)
        tensors = {name: list(t.shape) for name, t in new.items()
                   if name in old and tuple(old[name].shape) != tuple(t.shape)}
        if not tensors:
            continue
        old_attrs = _int_attrs(before[path])
        attrs = {k: v for k, v in _int_attrs(module).items() if k in old_attrs and old_attrs[k] != v}
        out[path or "<model>"] = {"attrs": attrs, "tensors": tensors}
    return out


def _resized(tensor: torch.Tensor, shape: list[int]) -> torch.Tensor:
    """``tensor`` cut to ``shape`` (its leading slice in every dimension); zeros where the shape grows. The values
    are placeholders until the pruned checkpoint is loaded, but a leading slice keeps the model usable without
    one (FLOP counting, a smoke test)."""
    if len(shape) != tensor.dim():
        return torch.zeros(shape, dtype=tensor.dtype, device=tensor.device)
    out = torch.zeros(shape, dtype=tensor.dtype, device=tensor.device)
    index = tuple(slice(0, min(a, b)) for a, b in zip(tensor.shape, shape))
    out[index] = tensor[index]
    return out


def apply_pruned_shapes(model: nn.Module, shapes: dict[str, dict[str, dict[str, Any]]]) -> nn.Module:
    """Resize the layers ``shapes`` lists, in place (see the module docstring), and return ``model``.

    Args:
        model: a freshly built model of the unpruned architecture.
        shapes: ``{module_path: {"attrs": {...}, "tensors": {name: shape}}}`` as :func:`pruned_shapes` writes it.

    Raises:
        ValueError: a path, tensor or attribute the model does not have (named), or a malformed entry.
    """
    if not isinstance(shapes, dict):
        raise ValueError(f"PrunedModel: pruned_shapes must be a mapping of module paths, got {type(shapes).__name__}")
    modules = dict(model.named_modules())
    for path, entry in shapes.items():
        module = modules.get("" if path == "<model>" else path)
        if module is None:
            raise ValueError(f"PrunedModel: pruned_shapes names the layer {path!r}, which the model "
                             f"{type(model).__name__} does not have")
        if not isinstance(entry, dict) or not set(entry) <= {"attrs", "tensors"}:
            raise ValueError(f"PrunedModel: pruned_shapes.{path} must be {{attrs: {{...}}, tensors: {{...}}}}, "
                             f"got {entry!r}")
        own = _own_tensors(module)
        for name, shape in (entry.get("tensors") or {}).items():
            if name not in own:
                raise ValueError(f"PrunedModel: pruned_shapes.{path}.tensors names {name!r}; the layer "
                                 f"{type(module).__name__} has {sorted(own)}")
            if not (isinstance(shape, list) and all(isinstance(s, int) and s >= 0 for s in shape)):
                raise ValueError(f"PrunedModel: pruned_shapes.{path}.tensors.{name} must be a list of sizes, "
                                 f"got {shape!r}")
            new = _resized(own[name].detach(), shape)
            if name in module._parameters:
                module._parameters[name] = nn.Parameter(new, requires_grad=own[name].requires_grad)
            else:
                module._buffers[name] = new
        for name, value in (entry.get("attrs") or {}).items():
            if not hasattr(module, name):
                raise ValueError(f"PrunedModel: pruned_shapes.{path}.attrs names {name!r}, which the layer "
                                 f"{type(module).__name__} does not have")
            setattr(module, name, tuple(value) if isinstance(value, list) else value)
    return model


@MODELS.register_module(name="PrunedModel")
def build_pruned_model(pruned_from: str, pruned_shapes: dict, **model_args: Any) -> nn.Module:
    """Build ``{type: pruned_from, **model_args}`` in the current scope, then resize it to ``pruned_shapes``.

    Args:
        pruned_from: the registered type of the model that was pruned (e.g. the config's original ``model.type``).
        pruned_shapes: the layers pruning changed (:func:`pruned_shapes`).
        **model_args: the model's own arguments, as in the original config.

    Returns:
        An instance of ``pruned_from``'s class with the pruned layer widths (weights are placeholders until a
        checkpoint is loaded).
    """
    if not isinstance(pruned_from, str) or not pruned_from:
        raise ValueError(f"PrunedModel: pruned_from must name the pruned model's type, got {pruned_from!r}")
    model = ROOT_MODELS.build({"type": pruned_from, **copy.deepcopy(model_args)})
    return apply_pruned_shapes(model, pruned_shapes)
