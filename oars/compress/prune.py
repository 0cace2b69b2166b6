"""Structured channel pruning of a task model's backbone and neck to a FLOPs or parameter target (torch-pruning).

The dependency graph of torch-pruning keeps the network valid: removing an output channel of a convolution removes
the matching input channel of every layer that reads it (through residual additions, concatenations and
normalisations). Layers outside the pruning scope (by default everything but ``backbone`` and ``neck``: the heads,
whose final class/box convolutions must keep their channels) are never pruned at their outputs; their inputs follow
the scope's pruned widths. Scope layers whose outputs reach RoI pooling keep them too
(:mod:`oars.compress.prune_kept`): an R-CNN's FPN is pruned inside (its lateral convs, coupled across levels by the
top-down additions, and the output convs' inputs), while the maps the RPN and RoI heads read keep their width.

A target (``target_flops=0.5``: the pruned model has at most 50% of the original FLOPs) is reached by bisection on
the per-layer channel ratio, each trial pruning a copy; ``steps=N`` reaches it in N pruning steps with importance
estimated again on the already pruned network before each step.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from oars.errors import OarsError

from .measure import ForwardFn, count_flops, count_params, tensor_forward
from .prune_base import PRUNE_FEATURE as PRUNE_FEATURE  # re-exported: part of this module's interface
from .prune_base import in_scope
from .prune_base import torch_pruning as torch_pruning  # re-exported: part of this module's interface
from .prune_kept import roi_pooled_layers

CRITERIA = ("l1", "l2", "taylor")
LossFn = Callable[[nn.Module], torch.Tensor]
_BISECT_ROUNDS = 7


@dataclass
class PruneSettings:
    """How to prune (the ``compress:`` options that concern pruning; see oars.compress.options)."""

    target_flops: float | None = None
    target_params: float | None = None
    criterion: str = "l1"
    steps: int = 1
    scope: list[str] = field(default_factory=lambda: ["backbone", "neck"])
    ignore: list[str] = field(default_factory=list)
    max_layer_ratio: float = 0.9
    round_to: int | None = None
    global_pruning: bool = False


@dataclass
class PruneReport:
    """What pruning did: the measure before/after, the per-step ratios and the layers it could not prune."""

    measure: str
    target: float
    before: float
    after: float
    flops_before: float
    flops_after: float
    params_before: int
    params_after: int
    step_ratios: list[float]
    unprunable: dict[str, str]

    @property
    def achieved(self) -> float:
        return self.after / self.before if self.before else 1.0


def _importance(criterion: str):
    tp = torch_pruning()

    if criterion == "l1":
        return tp.importance.MagnitudeImportance(p=1)
    if criterion == "l2":
        return tp.importance.MagnitudeImportance(p=2)
    if criterion == "taylor":
        return tp.importance.TaylorImportance()
    raise OarsError(f"compress.criterion must be one of {list(CRITERIA)}, got {criterion!r}")


def scope_layers(model: nn.Module, settings: PruneSettings,
                 kept: Sequence[str] = ()) -> tuple[list[str], list[nn.Module]]:
    """The scope prefixes that exist in ``model`` and the layers pruning must keep whole at their outputs: those
    outside the scope, those in ``settings.ignore`` and the module paths in ``kept`` (:func:`kept_layers`).

    Raises:
        OarsError: no scope prefix names a module of the model, or an ``ignore`` path is not a module (named).
    """
    tp = torch_pruning()

    names = dict(model.named_modules())
    prefixes = [p for p in settings.scope if p in names]
    if not prefixes:
        top = [n for n, _ in model.named_children()]
        raise OarsError(f"compress.scope {settings.scope}: none of these is a module of {type(model).__name__} "
                        f"(its top-level modules: {top})")
    for path in settings.ignore:
        if path not in names:
            raise OarsError(f"compress.ignore: {path!r} is not a module of {type(model).__name__}")
    roots = (tp.ops.TORCH_CONV, tp.ops.TORCH_LINEAR)
    ignored = [m for n, m in model.named_modules()
               if isinstance(m, roots) and (not in_scope(n, prefixes) or in_scope(n, settings.ignore) or n in kept)]
    return prefixes, ignored


def check_supported(model: nn.Module, prefixes: list[str]) -> None:
    """Every layer inside the scope that holds weights must be one torch-pruning can slice.

    Raises:
        OarsError: naming each layer (path and type) whose weights the pruner would leave at the old width.
    """
    tp = torch_pruning()

    from .prune_layers import custom_pruners

    graph = tp.DependencyGraph()
    for layer_type, rule in custom_pruners().items():
        graph.register_customized_layer(layer_type, rule)
    bad = []
    for path, module in model.named_modules():
        if not in_scope(path, prefixes):
            continue
        own = list(module.parameters(recurse=False)) + [b for b in module.buffers(recurse=False) if b is not None]
        rule = graph.get_pruner_of_module(module)
        # a layer type torch-pruning does not know gets its generic element-wise rule, which slices parameters it
        # finds unwrapped but never buffers: FrozenBatchNorm2d (weights held as buffers) would keep the old width
        generic = rule is None or (type(module) not in graph.CUSTOMIZED_PRUNERS
                                   and tp.ops.module2type(module) == tp.ops.OPTYPE.ELEMENTWISE)
        buffers = [b for b in module.buffers(recurse=False) if b is not None and b.dim() > 0]
        if (own and rule is None) or (generic and buffers):
            bad.append(f"{path} ({type(module).__name__})")
    if bad:
        raise OarsError("these layers inside the pruning scope cannot be pruned (torch-pruning has no rule for "
                        f"their weights, which would keep the old width): {', '.join(bad)}; leave them out of "
                        "compress.scope")


TRACE_FORWARD = "pruning_trace_forward"


@contextlib.contextmanager
def trace_forwards(model: nn.Module) -> Iterator[None]:
    """While the dependency graph is traced, a module that defines ``pruning_trace_forward(x)`` runs that instead of
    ``forward``.

    Why: an operation that moves values between positions but keeps every channel where it was (e.g. a shift along
    time written with channel slices and concatenations) couples no channels, yet torch-pruning's index mapping
    cannot follow slices and concatenations on other dimensions. Such a module offers a forward without the
    operation for tracing; the pruned network still runs its real ``forward``.
    """
    patched = [m for m in model.modules() if callable(getattr(m, TRACE_FORWARD, None))]
    for module in patched:
        module.forward = getattr(module, TRACE_FORWARD)
    try:
        yield
    finally:
        for module in patched:
            del module.forward


def kept_layers(model: nn.Module, inputs: Any, forward_fn: ForwardFn, prefixes: list[str]) -> dict[str, str]:
    """In-scope layers that keep their output width although the graph could prune them (their outputs reach RoI
    pooling: :mod:`oars.compress.prune_kept`), each with the reason; traced once, on the unpruned model."""
    tp = torch_pruning()

    from .prune_layers import custom_pruners  # needs the optional torch_pruning at import

    try:
        with trace_forwards(model):
            graph = tp.DependencyGraph().build_dependency(model, example_inputs=inputs, forward_fn=forward_fn,
                                                          customized_pruners=custom_pruners())
    except Exception as err:  # noqa: BLE001 - tracing failures come from deep inside the model
        raise OarsError(f"the dependency graph of {type(model).__name__} could not be traced for pruning: "
                        f"{type(err).__name__}: {err}") from err
    return roi_pooled_layers(model, graph, prefixes)


def _build_pruner(model: nn.Module, inputs: Any, forward_fn: ForwardFn, settings: PruneSettings, ratio: float,
                  ignored: list[nn.Module], layer_ratios: dict[str, float] | None = None):
    """torch-pruning's pruner of ``model``: every prunable layer by ``ratio``, or (``layer_ratios``: module path ->
    ratio, automatic pruning's per-group ratios) each listed layer by its own ratio and the others by ``ratio``."""
    tp = torch_pruning()

    from .prune_layers import custom_pruners

    modules = dict(model.named_modules())
    ratio_dict = {modules[p]: r for p, r in (layer_ratios or {}).items()} or None
    try:
        with trace_forwards(model):
            return tp.pruner.MetaPruner(
            model, inputs, importance=_importance(settings.criterion), pruning_ratio=ratio,
            pruning_ratio_dict=ratio_dict,
            max_pruning_ratio=settings.max_layer_ratio, ignored_layers=ignored, round_to=settings.round_to,
            global_pruning=settings.global_pruning, forward_fn=forward_fn, customized_pruners=custom_pruners())
    except Exception as err:  # noqa: BLE001 - tracing failures come from deep inside the model
        raise OarsError(f"the dependency graph of {type(model).__name__} could not be traced for pruning: "
                        f"{type(err).__name__}: {err}") from err


def _taylor_grads(model: nn.Module, loss_fn: LossFn | None) -> None:
    """Gradients for Taylor importance, with the model's buffers (BN statistics) and random state left as found."""
    if loss_fn is None:
        raise OarsError("compress.criterion taylor needs the training loss (a batch of training data)")
    buffers = {k: v.clone() for k, v in model.named_buffers()}
    was_training = model.training
    model.zero_grad(set_to_none=True)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model.train()
        loss_fn(model).backward()
    model.train(was_training)
    with torch.no_grad():
        for k, v in model.named_buffers():
            v.copy_(buffers[k])


def prune_copy(model: nn.Module, inputs: Any, forward_fn: ForwardFn, settings: PruneSettings, ratio: float,
               loss_fn: LossFn | None, kept: Sequence[str],
               layer_ratios: dict[str, float] | None = None) -> tuple[nn.Module, Any]:
    """A copy of ``model`` with every in-scope layer pruned by ``ratio`` (one torch-pruning step), or by its own
    ratio in ``layer_ratios`` (module path -> ratio), the layers in ``kept`` whole at their outputs."""
    trial = copy.deepcopy(model)
    _, ignored = scope_layers(trial, settings, kept)
    if settings.criterion == "taylor":
        _taylor_grads(trial, loss_fn)
    pruner = _build_pruner(trial, inputs, forward_fn, settings, ratio, ignored, layer_ratios)
    pruner.step()
    trial.zero_grad(set_to_none=True)
    return trial, pruner


def measure_pruned(model: nn.Module, inputs: Any, forward_fn: ForwardFn, what: str) -> float:
    """FLOPs or parameters of a pruned trial, which must still run.

    Raises:
        OarsError: the pruned network fails (a scope layer feeds an operation the dependency graph cannot follow,
            or a layer that checks its input width against a constructor argument), with the model's own message.
    """
    try:
        flops = count_flops(model, inputs, forward_fn)
    except (RuntimeError, ValueError, IndexError) as err:
        raise OarsError(f"the pruned network no longer runs ({type(err).__name__}: {err}); a layer in compress.scope "
                        "feeds an operation the dependency graph cannot follow, or a layer outside it that keeps its "
                        "input width: add the layer that feeds it to compress.ignore (keeps its output channels) or "
                        "narrow compress.scope (e.g. [backbone])") from None
    return flops if what == "flops" else float(count_params(model))


def tied_layers(model: nn.Module, pruner: Any, prefixes: list[str], ignored: list[nn.Module]) -> dict[str, str]:
    """In-scope layers whose output channels could not be pruned, each with the reason (the kept layer it is tied
    to through the dependency graph, e.g. a head's output convolution fed by a residual sum)."""
    tp = torch_pruning()

    names = {m: n for n, m in model.named_modules()}
    ignored_set = set(ignored)
    out = {}
    for path, module in model.named_modules():
        if not (in_scope(path, prefixes) and isinstance(module, (tp.ops.TORCH_CONV, tp.ops.TORCH_LINEAR))):
            continue
        if module in ignored_set or module not in pruner.DG.module2node:
            continue
        group = pruner.DG.get_pruning_group(module, pruner.DG.get_pruner_of_module(module).prune_out_channels, [0])
        for dep, _ in group:
            target = dep.target.module
            if target in ignored_set and pruner.DG.is_out_channel_pruning_fn(dep.handler):
                out[path] = f"its output channels are tied to {names.get(target, type(target).__name__)}, " \
                            "which keeps its width (outside the pruning scope or ignored)"
                break
    return out


def prune_to_target(model: nn.Module, inputs: Any, settings: PruneSettings, forward_fn: ForwardFn = tensor_forward,
                    loss_fn: LossFn | None = None) -> tuple[nn.Module, PruneReport]:
    """Prune ``model`` (left untouched) to ``settings.target_flops`` or ``target_params`` of its original size.

    Args:
        model: the trained network (a task model: ``forward(inputs, mode='tensor')``).
        inputs: example inputs for tracing and FLOP counting (the data preprocessor's ``inputs`` of a batch).
        settings: target, criterion, steps, scope.
        forward_fn: how to run the model on ``inputs``.
        loss_fn: ``loss_fn(model) -> scalar loss`` on training data, for ``criterion='taylor'``.

    Returns:
        ``(pruned copy, report)``; the pruned copy's FLOPs (or params) are <= target x the original's.

    Raises:
        OarsError: no target or two targets, a target outside (0, 1), a target the scope cannot reach (with the
            smallest reachable fraction), a layer inside the scope that cannot be pruned, a model that cannot be traced.
    """
    what, target = _target(settings)
    model = copy.deepcopy(model).eval()
    prefixes, ignored = scope_layers(model, settings)
    check_supported(model, prefixes)
    kept = kept_layers(model, inputs, forward_fn, prefixes)
    flops0, params0 = count_flops(model, inputs, forward_fn), count_params(model)
    before = flops0 if what == "flops" else float(params0)
    current, ratios, pruner = model, [], None
    for step in range(1, settings.steps + 1):
        goal = before * (1.0 - (1.0 - target) * step / settings.steps)
        current, ratio, pruner = _bisect(current, inputs, forward_fn, settings, loss_fn, kept, what, goal,
                                         before, target)
        ratios.append(ratio)
    after = measure_pruned(current, inputs, forward_fn, what)
    _, ignored_now = scope_layers(current, settings, list(kept))
    report = PruneReport(measure=what, target=target, before=before, after=after, flops_before=flops0,
                         flops_after=count_flops(current, inputs, forward_fn), params_before=params0,
                         params_after=count_params(current), step_ratios=ratios,
                         unprunable={**kept, **(tied_layers(current, pruner, prefixes, ignored_now) if pruner else {})})
    return current, report


def _target(settings: PruneSettings) -> tuple[str, float]:
    given = [(k, v) for k, v in (("flops", settings.target_flops), ("params", settings.target_params))
             if v is not None]
    if len(given) != 1:
        raise OarsError("pruning needs exactly one target: --target-flops F or --target-params P (the fraction of "
                        f"the original to keep, e.g. 0.5), got {dict(given) or 'none'}")
    what, value = given[0]
    if not (isinstance(value, (int, float)) and 0.0 < float(value) < 1.0):
        raise OarsError(f"--target-{what} must be a fraction of the original in (0, 1) (0.5 = at most half), "
                        f"got {value!r}")
    if settings.steps < 1:
        raise OarsError(f"--steps must be at least 1, got {settings.steps}")
    if not 0.0 < settings.max_layer_ratio < 1.0:
        raise OarsError(f"compress.max_layer_ratio must be in (0, 1), got {settings.max_layer_ratio}")
    return what, float(value)


def _bisect(model: nn.Module, inputs: Any, forward_fn: ForwardFn, settings: PruneSettings, loss_fn: LossFn | None,
            kept: dict[str, str], what: str, goal: float, original: float, target: float):
    """The smallest one-step channel ratio whose pruned copy of ``model`` measures <= ``goal``."""
    hi = settings.max_layer_ratio
    best, pruner = prune_copy(model, inputs, forward_fn, settings, hi, loss_fn, list(kept))
    value = measure_pruned(best, inputs, forward_fn, what)
    if value > goal * (1 + 1e-9):
        raise OarsError(
            f"--target-{what} {target:g} is unreachable: pruning every layer in {settings.scope} by the most "
            f"allowed (compress.max_layer_ratio {settings.max_layer_ratio:g} of each layer's channels) still leaves "
            f"{value / original:.3f} of the original {what} (the rest is in layers outside the scope or tied to "
            f"them); ask for at least {value / original:.3f}, widen compress.scope or raise max_layer_ratio")
    lo, best_ratio = 0.0, hi
    for _ in range(_BISECT_ROUNDS):
        mid = (lo + hi) / 2
        trial, trial_pruner = prune_copy(model, inputs, forward_fn, settings, mid, loss_fn, list(kept))
        if measure_pruned(trial, inputs, forward_fn, what) <= goal * (1 + 1e-9):
            hi, best, best_ratio, pruner = mid, trial, mid, trial_pruner
        else:
            lo = mid
    return best, best_ratio, pruner
