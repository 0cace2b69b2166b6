"""The module and sample input a config's FLOPs are counted on: the task's export graph on the task's own sample.

Why the export graph: it is what a task already declares for every model it serves (one image, clips, noise +
label, image + attributes) through ``Exporter.build_export_spec``, so counting needs no task-specific
code here, and the number is that of the model that gets deployed (``mode='tensor'`` plus what the export puts in
the graph). The weights are the random initial ones: FLOPs and parameters do not depend on them.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from mmengine.config import Config

from oars.errors import OarsError


@dataclass
class CountTarget:
    """What :func:`oars.analysis.flops.count_flops` runs: ``module(*inputs)``.

    Attributes:
        module: the export graph's module (eval mode).
        inputs: one tensor per graph input, in the module's argument order.
        input_names: the graph input names.
        model: the model built from the config (its class names the report).
    """

    module: torch.nn.Module
    inputs: tuple[torch.Tensor, ...]
    input_names: list[str]
    model: torch.nn.Module


def parse_shape(values: Sequence[str] | None) -> tuple[int, int] | None:
    """``--shape`` -> (H, W): one size (square) or H W, positive ints; None when not given.

    Raises:
        OarsError: anything else, naming the value and what is expected.
    """
    if values is None:
        return None
    try:
        sizes = [int(v) for v in values]
    except (TypeError, ValueError):
        sizes = []
    if len(sizes) not in (1, 2) or min(sizes) < 1:
        raise OarsError(f"--shape {' '.join(str(v) for v in values)}: expected the input's spatial size as one "
                        "positive int (square) or two (H W), e.g. --shape 512 or --shape 512 1024")
    return sizes[0], sizes[-1]


def build_count_target(cfg: Config, shape: tuple[int, int] | None = None, device: str = "cpu") -> CountTarget:
    """Build the config's model (random weights) and its export graph + sample input through the config's task.

    Args:
        cfg: the loaded config (``default_scope`` names the task).
        shape: (H, W) of the input instead of the one the config exports at; None keeps it.
        device: where the model runs.

    Returns:
        The :class:`CountTarget`.

    Raises:
        OarsError: no task for the config, an export section the task cannot use, a ``shape`` the model's inputs
            cannot take (no spatial axes) or a model that fails on it; each names the config and the cause.
    """
    from mmengine.registry import MODELS, DefaultScope

    from oars.export.guards import DEFAULT_OPSET
    from oars.export.options import task_export_options
    from oars.tasks import get_task

    task = get_task(cfg.get("default_scope"), cfg.filename)
    task.import_registries()
    options = replace(task_export_options(task, cfg, dynamic=False, opset=DEFAULT_OPSET), counting=True)
    image_input = len(options.input_shape) == 4
    if shape is not None and image_input:  # the graph itself may depend on it (fixed-size decoding)
        options = replace(options, input_shape=(*options.input_shape[:2], *shape))
    with DefaultScope.overwrite_default_scope(cfg.get("default_scope")):
        model = MODELS.build(copy.deepcopy(cfg.model))
    if not getattr(model, "dataset_meta", None):
        model.dataset_meta = {}
    model = model.to(device).eval()
    try:  # the task may run the graph once while building it (to read its output shape)
        spec = task.exporter(cfg).build_export_spec(model, cfg, options)
        module = spec.module.to(device).eval()
        if spec.sample_inputs is not None:
            inputs: Any = spec.sample_inputs(int(options.input_shape[0]), 0)[0]
            inputs = (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)
            if shape is not None:
                inputs = _resized(inputs, shape, spec.graph_inputs, cfg)
        else:  # the core's image export: the graph takes the normalised batch [B, 3, H, W]
            generator = torch.Generator().manual_seed(0)
            inputs = (torch.randn(tuple(options.input_shape), generator=generator).to(device),)
    except OarsError:
        raise
    except (RuntimeError, ValueError) as err:  # e.g. an input size the architecture cannot take
        size = f" at --shape {shape[0]} {shape[1]}" if shape is not None else ""
        raise OarsError(f"{cfg.filename}: the export graph of {type(model).__name__} cannot be built or run{size}: "
                        f"{type(err).__name__}: {str(err)[:500]}") from None
    return CountTarget(module=module, inputs=tuple(inputs), input_names=spec.graph_inputs, model=model)


def _resized(inputs: tuple[torch.Tensor, ...], shape: tuple[int, int], names: Sequence[str],
             cfg: Config) -> tuple[torch.Tensor, ...]:
    """The sample inputs with the last two axes of every image-like input (rank >= 4) set to ``shape``: new random
    values (the count depends on shapes only)."""
    generator = torch.Generator().manual_seed(0)
    out, changed = [], False
    for x in inputs:
        if x.dim() >= 4 and x.is_floating_point():
            new = torch.randn((*x.shape[:-2], *shape), generator=generator, dtype=x.dtype).to(x.device)
            out.append(new)
            changed = True
        else:
            out.append(x)
    if not changed:
        given = ", ".join(f"{n} {list(x.shape)}" for n, x in zip(names, inputs))
        raise OarsError(f"--shape {shape[0]} {shape[1]}: the inputs of {cfg.filename}'s model ({given}) have no "
                        "spatial axes to resize; leave --shape out")
    return tuple(out)
