"""Compiled training: the ``compile`` config key (``tools/train.py --compile``) and what ``torch.compile`` did.

What is compiled: the model's forward in ``mode='loss'`` (:func:`compile_for_training`, called by
``OarsRunner._maybe_compile`` when training starts, where mmengine's Runner would compile the whole
``model.train_step``). Why not mmengine's choice: its ``train_step`` holds the optimizer wrapper, whose gradient
clipping logs ``grad_norm`` into the message hub's numpy history; dynamo guards on that growing array and the
logged value, so every step recompiles (measured on TSM: one new graph per step) until the recompile limit sends
the step back to eager. Compiling the forward keeps the data preprocessor (lists of images of any size), the
optimizer wrapper and the logging eager; AOT autograd compiles the backward of the forward graph; ``predict``
and ``tensor`` modes (validation, export) stay eager. The optimizer's ``step`` and the gradient clipping are
compiled on their own (:func:`compile_optimizer_steps`, PyTorch's "compiling the optimizer" recipe) unless
``compile.optimizer`` is false.

oars checks the key once (:func:`resolve_compile`, from ``oars.engine.resolve``) and adds ``CompileReportHook``,
which logs after the first step how many graphs dynamo made, every graph break and every function it gave up on
(left to eager Python), and again whenever a later step adds recompilations or breaks: a model that silently runs
eager is what this prevents.

``compile: true`` uses torch.compile's defaults (inductor); a mapping takes torch.compile's arguments
``mode`` (default | reduce-overhead | max-autotune | max-autotune-no-cudagraphs), ``dynamic`` (true | false |
null), ``backend`` (inductor, aot_eager, eager, ...), ``fullgraph`` (bool) and ``options`` (inductor options),
and oars' ``optimizer`` (bool, default true: compile the optimizer step and gradient clipping too).
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch
from mmengine.config import Config

from oars.config import cfg_provenance, source_of
from oars.config.resolved import record
from oars.errors import OarsError

COMPILE_KEYS = ("mode", "dynamic", "backend", "fullgraph", "options")
OARS_COMPILE_KEYS = ("optimizer",)  # read by oars, not passed to torch.compile
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
REPORT_HOOK = "CompileReportHook"
_HOOK_REASON = ("CompileReportHook logs the graphs, graph breaks and functions left to eager after the first "
                "compiled step and whenever later steps add some (a compiled run never falls back silently)")


def compile_options(value: Any, where: str = "<config>") -> dict | None:
    """The ``torch.compile`` keyword arguments of a ``compile`` value; None when compiling is off.

    Args:
        value: ``cfg.compile``: None/false (off), true (torch.compile's defaults) or a mapping of its arguments.
        where: the file (or flag) that set it, for messages.

    Returns:
        A dict of ``torch.compile`` arguments (empty for ``true``; oars' own keys such as ``optimizer`` left out:
        :func:`compiles_optimizer` reads them), or None.

    Raises:
        OarsError: another type, an unknown key or a bad ``mode``/``dynamic``/``fullgraph``/``optimizer``, naming
            ``where``.
    """
    if value is None or value is False:
        return None
    if value is True:
        return {}
    if not isinstance(value, dict):
        raise OarsError(f"{where}: compile: expected true, false or a mapping of torch.compile arguments "
                        f"({', '.join(COMPILE_KEYS)}) and {', '.join(OARS_COMPILE_KEYS)}, got {value!r}")
    unknown = sorted(set(value) - set(COMPILE_KEYS) - set(OARS_COMPILE_KEYS))
    if unknown:
        raise OarsError(f"{where}: compile: unknown key(s) {unknown}; accepted here: torch.compile's "
                        f"{', '.join(COMPILE_KEYS)} and oars' {', '.join(OARS_COMPILE_KEYS)}")
    if not isinstance(value.get("optimizer", True), bool):
        raise OarsError(f"{where}: compile.optimizer: expected true or false (compile the optimizer step and "
                        f"gradient clipping), got {value['optimizer']!r}")
    mode = value.get("mode")
    if mode is not None and mode not in MODES:
        raise OarsError(f"{where}: compile.mode: expected one of {', '.join(MODES)}, got {mode!r}")
    if value.get("dynamic") not in (None, True, False):
        raise OarsError(f"{where}: compile.dynamic: expected true, false or null, got {value['dynamic']!r}")
    if not isinstance(value.get("fullgraph", False), bool):
        raise OarsError(f"{where}: compile.fullgraph: expected true or false, got {value['fullgraph']!r}")
    if value.get("backend") is not None and not isinstance(value["backend"], str):
        raise OarsError(f"{where}: compile.backend: expected a backend name (inductor, aot_eager, eager...), got "
                        f"{value['backend']!r}")
    if value.get("options") is not None and not isinstance(value["options"], dict):
        raise OarsError(f"{where}: compile.options: expected a mapping of inductor options, got {value['options']!r}")
    if mode is not None and value.get("options") is not None:  # torch.compile refuses both
        raise OarsError(f"{where}: compile: give mode or options, not both (a mode is a preset of inductor "
                        f"options: torch._inductor.list_mode_options({mode!r}) lists them, to copy into options)")
    if (value.get("backend") or "inductor") == "inductor":
        check_inductor_options(value.get("options") or {}, where)
    return {k: v for k, v in value.items() if k not in OARS_COMPILE_KEYS}


def compiles_optimizer(value: Any) -> bool:
    """Whether a ``compile`` value (checked by :func:`compile_options`) compiles the optimizer step too: yes unless
    compiling is off or ``compile.optimizer`` is false."""
    if value is None or value is False:
        return False
    return not (isinstance(value, dict) and value.get("optimizer") is False)


def check_inductor_options(options: dict, where: str) -> None:
    """Refuse an inductor option torch.compile would refuse when training starts, naming the closest names.

    Why: torch.compile raises a RuntimeError listing all of inductor's ~900 options for a misspelled one, at the
    first compiled step; checked here, the config is refused before anything runs.

    Raises:
        OarsError: an unknown option (with close names) or a value of the wrong type, naming ``where``.
    """
    from typing import get_origin

    from torch._inductor import config

    from oars.config.registry_lookup import closest

    known = config.get_config_copy()
    for key, value in options.items():
        name = str(key).replace("-", "_")  # as torch.compile reads it
        if name not in known:
            close = closest(name, list(known))
            raise OarsError(f"{where}: compile.options.{key}: not an inductor option"
                            + (f"; close names: {', '.join(close)}" if close else "")
                            + " (torch._inductor.config lists them)")
        expected = config.get_type(name)
        if get_origin(expected) is None and not isinstance(value, expected):
            raise OarsError(f"{where}: compile.options.{key}: expected a {type(known[name]).__name__}, got "
                            f"{value!r}")


# Inductor options oars sets by default on the CPU (a user's compile.options wins), with the measurement behind each
CPU_INDUCTOR_DEFAULTS: dict[str, Any] = {
    # inductor converts convolution inputs to channels-last inside the graph and back at its edges; on the CPU that
    # made compiled training slower (benchmarks/compile_step.py, 2 threads, compiled / eager, on -> off: TSN
    # ResNet-50 8x224 px 0.84 -> 0.76, pix2pix demo 1.24 -> 0.99, DeepLabV3-R18 1.00 -> 0.95, docs/compression.md)
    "layout_optimization": False,
}


def with_device_defaults(options: dict, model: torch.nn.Module) -> dict:
    """``options`` plus :data:`CPU_INDUCTOR_DEFAULTS` when inductor compiles a model whose parameters are on the CPU.

    Why: inductor's defaults are tuned for CUDA; on the CPU one of them slows training down (see the table).

    Args:
        options: ``torch.compile`` arguments (:func:`compile_options`).
        model: the model to compile (its first parameter's device decides).

    Returns:
        A new dict. ``mode`` becomes its inductor options (torch.compile takes a mode or options, not both);
        options the user gave are kept as given. Unchanged for another backend or device.
    """
    if (options.get("backend") or "inductor") != "inductor":
        return dict(options)
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    if device.type != "cpu":
        return dict(options)
    from torch._inductor import list_mode_options

    out = {k: v for k, v in options.items() if k != "mode"}
    given = options.get("options") or list_mode_options(options.get("mode") or "default", options.get("dynamic"))
    out["options"] = {**CPU_INDUCTOR_DEFAULTS, **given}
    return out


def resolve_compile(cfg: Config, flag: bool, training: bool = True) -> None:
    """Apply ``--compile`` to ``cfg`` (``compile: true`` unless the config already holds a mapping), check the
    value, and add ``CompileReportHook`` when compiling a training run (mmengine compiles ``train_step`` only;
    ``training=False`` for evaluation); each change recorded with its reason.

    Raises:
        OarsError: a bad ``compile`` value (see :func:`compile_options`), naming the file or flag that set it.
    """
    given = cfg.get("compile")
    where = source_of(cfg_provenance(cfg), "compile") or cfg.filename or "<config>"
    if flag:
        if isinstance(given, dict):
            record(cfg, "compile", given, f"config ({where}); --compile flag too: the config's options are kept",
                   replace=False)
        else:
            cfg.compile = True
            was = f" (the config had {given!r})" if given is not None and given is not True else ""
            record(cfg, "compile", True, f"--compile flag{was}")
            where = "--compile"
    if compile_options(cfg.get("compile"), where) is None or not training:
        return
    hooks = list(cfg.get("custom_hooks") or [])
    if any(isinstance(h, dict) and h.get("type") == REPORT_HOOK for h in hooks):
        return
    hooks.append({"type": REPORT_HOOK})
    cfg.custom_hooks = hooks
    record(cfg, f"custom_hooks[{len(hooks) - 1}]", hooks[-1], f"engine: compile is on: {_HOOK_REASON}")


def compile_for_training(model: torch.nn.Module, options: dict) -> torch.nn.Module:
    """Make ``model``'s forward run compiled in ``mode='loss'`` (training) and eagerly in the other modes; for a
    model with its own ``train_step`` (GANs), which calls its networks directly, compile each network (every
    direct submodule with parameters but the data preprocessor) in place, in all modes.

    Args:
        model: an mmengine ``BaseModel`` (``forward(inputs, data_samples, mode)``), or a model wrapper (DDP) whose
            ``module`` is one.
        options: ``torch.compile`` arguments (:func:`compile_options`).

    Returns:
        The model itself (its ``forward`` replaced on the instance; parameters, buffers and ``state_dict``
        unchanged). A copy made afterwards (``copy.deepcopy``) would share the compiled forward of this instance:
        mmengine's EMA hook copies the model before training starts, so before this runs.
    """
    inner = getattr(model, "module", model)
    from mmengine.model import BaseModel

    own_step = type(inner).train_step is not BaseModel.train_step
    if own_step:  # its own train_step (GANs: several networks, several optimizers) need not call forward
        for name, child in inner.named_children():
            if name != "data_preprocessor" and any(True for _ in child.parameters()):
                child.compile(**options)
        return model
    eager = inner.forward
    compiled = torch.compile(eager, **options)

    @functools.wraps(eager)
    def forward(*args: Any, **kwargs: Any) -> Any:
        mode = kwargs.get("mode", args[2] if len(args) > 2 else "tensor")
        return compiled(*args, **kwargs) if mode == "loss" else eager(*args, **kwargs)

    inner.forward = forward
    return model


@dataclass
class CompileStats:
    """What dynamo did between two snapshots of ``torch._dynamo.utils.counters``.

    Attributes:
        graphs: graphs captured (a recompilation for new input shapes or Python values adds one).
        graph_breaks: reason (first line) -> count: where a graph ended and Python ran between graphs.
        eager_frames: reason (first line) -> count: functions dynamo gave up on, which run eagerly (e.g. the
            recompile limit hit, a generator).
    """

    graphs: int = 0
    graph_breaks: Counter = field(default_factory=Counter)
    eager_frames: Counter = field(default_factory=Counter)

    @property
    def empty(self) -> bool:
        return not (self.graphs or self.graph_breaks or self.eager_frames)


def snapshot() -> dict[str, Counter]:
    """A copy of the dynamo counters this module reads (graph breaks, frames left to eager, graph count)."""
    from torch._dynamo.utils import counters

    return {"graph_break": Counter(counters["graph_break"]), "unimplemented": Counter(counters["unimplemented"]),
            "stats": Counter(counters["stats"])}


def stats_since(before: dict[str, Counter], after: dict[str, Counter] | None = None) -> CompileStats:
    """The :class:`CompileStats` between ``before`` and ``after`` (default: now), reasons cut to their first line."""
    after = snapshot() if after is None else after

    def first_lines(key: str) -> Counter:
        out: Counter = Counter()
        for reason, count in (after[key] - before[key]).items():
            out[str(reason).strip().splitlines()[0] if str(reason).strip() else "(no reason given)"] += count
        return out

    graphs = after["stats"]["unique_graphs"] - before["stats"]["unique_graphs"]
    return CompileStats(graphs=int(graphs), graph_breaks=first_lines("graph_break"),
                        eager_frames=first_lines("unimplemented"))


def format_stats(stats: CompileStats, first: bool, limit: int = 5) -> str:
    """One log message: graphs, graph breaks (count and the first ``limit`` reasons), functions left to eager."""
    def reasons(counter: Counter) -> str:
        items = counter.most_common()
        text = "; ".join(f"{r} (x{n})" for r, n in items[:limit])
        return text + (f"; ... {len(items) - limit} more" if len(items) > limit else "")

    head = "torch.compile, first step" if first else "torch.compile, later steps added"
    parts = [f"{head}: {stats.graphs} graph(s){' (recompilation: new shapes or values)' if not first else ''}",
             f"{sum(stats.graph_breaks.values())} graph break(s)"]
    if stats.graph_breaks:
        parts[-1] += f" [{reasons(stats.graph_breaks)}]"
    parts.append(f"{sum(stats.eager_frames.values())} function(s) left to eager")
    if stats.eager_frames:
        parts[-1] += f" [{reasons(stats.eager_frames)}]"
    return ", ".join(parts)


def compile_optimizer_steps(optim_wrapper: Any, options: dict) -> list[str]:
    """Compile, in place, the ``step`` of each optimizer of an mmengine optimizer wrapper and its gradient clipping.

    Why: on the CPU torch.optim runs its per-parameter Python loop (its multi-tensor ``foreach`` kernels are for
    CUDA), with gradient clipping one norm per parameter: about a fifth of a TSM demo step's operator time
    (profiled), eager on both sides of a model compiled alone. Compiled (PyTorch's "compiling the optimizer"
    recipe), inductor fuses the update of all parameters into a few kernels: compiled / eager, forward only ->
    forward + optimizer, pix2pix 0.96 -> 0.71, YOLOv3 0.86 -> 0.81, TSM 0.87 either way (docs/compression.md,
    benchmarks/compile_step.py --eager-optimizer for the first). torch.optim breaks
    the graph on purpose around its ``no_grad`` update (one graph break per optimizer, reported as such). The
    learning rates reach the compiled step as tensors (:func:`_tensor_learning_rates`), so a scheduler changing them
    every iteration does not recompile it.

    Args:
        optim_wrapper: an ``OptimWrapper`` (or ``AmpOptimWrapper``) or an ``OptimWrapperDict`` (GANs: one per
            network). Optimizers that are not ``torch.optim.Optimizer`` are left alone.
        options: ``torch.compile`` arguments (:func:`compile_options`); ``fullgraph`` is dropped for the optimizer,
            whose deliberate graph break it would turn into an error.

    Returns:
        The names of the compiled wrappers (the optimizer class for a single wrapper), each followed by
        ``" + gradient clipping"`` where that was compiled too.
    """
    wrappers = getattr(optim_wrapper, "optim_wrappers", None) or {"": optim_wrapper}
    options = {k: v for k, v in options.items() if k != "fullgraph"}
    compiled = []
    for name, wrapper in wrappers.items():
        optimizer = getattr(wrapper, "optimizer", None)
        if not isinstance(optimizer, torch.optim.Optimizer):
            continue
        eager = optimizer.step
        optimizer.step = _tensor_learning_rates(optimizer, torch.compile(eager, **options), eager)
        label = name or type(optimizer).__name__
        if getattr(wrapper, "clip_func", None) is not None:  # mmengine: clip_grad_norm_ / clip_grad_value_
            wrapper.clip_func = torch.compile(wrapper.clip_func, **options)
            label += " + gradient clipping"
        compiled.append(label)
    return compiled


def _tensor_learning_rates(optimizer: torch.optim.Optimizer, compiled_step: Any, eager_step: Any) -> Any:
    """``compiled_step`` run with each param group's ``lr`` held in a 0-dim float64 tensor, the floats restored
    after; ``eager_step`` instead while a group's learning rate is 0.

    Why: dynamo bakes a float ``lr`` into the graph as a constant (SGD passes it as ``alpha``), so each new value
    an iteration-wise scheduler (warm-up, cosine, poly) writes recompiles the step, and after 8 values dynamo gives
    up and runs it eager (measured on SGD). A tensor is a graph input: PyTorch's recipe for compiled optimizers
    with schedulers. mmengine's schedulers, logging and checkpoints keep seeing floats. (A group with ``foreach:
    true`` is traced with its per-parameter loop instead, which torch requires for a tensor lr.) A learning rate of 0
    (a warm-up starting at 0, a group frozen with ``lr_mult: 0``) runs eagerly: compiled, Adam takes its
    "capturable" form, which divides by the step size, and turned every weight into NaN (torch 2.14, measured).
    """
    holders = [torch.zeros((), dtype=torch.float64) for _ in optimizer.param_groups]

    @functools.wraps(compiled_step)
    def step(*args: Any, **kwargs: Any) -> Any:
        groups = optimizer.param_groups
        given = [group["lr"] for group in groups]
        if any(not isinstance(lr, torch.Tensor) and lr == 0 for lr in given):
            return eager_step(*args, **kwargs)
        if len(given) != len(holders) or any(isinstance(lr, torch.Tensor) for lr in given):
            return compiled_step(*args, **kwargs)  # groups added later, or tensors already: as they are
        foreach = [group.get("foreach") for group in groups]
        for group, holder, lr in zip(groups, holders, given):
            holder.fill_(lr)
            group["lr"] = holder
            if group.get("foreach") and not group.get("capturable"):
                # torch refuses a tensor lr with foreach (non-capturable); compiled, the per-parameter loop is
                # fused all the same, and the arithmetic is the same
                group["foreach"] = False
        try:
            return compiled_step(*args, **kwargs)
        finally:
            for group, lr, flag in zip(groups, given, foreach):
                group["lr"] = lr
                if "foreach" in group:
                    group["foreach"] = flag

    return step
