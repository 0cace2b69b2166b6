"""Parameters, FLOPs and MACs of one forward pass, in total and per module.

Counting is ``torch.utils.flop_counter.FlopCounterMode``'s: shape-based formulas for the matrix products,
convolutions and attention that run (through ``__torch_dispatch__``, so functional calls count too), **2 FLOPs per
multiply-add**. MMDetection's ``get_flops`` (mmengine's analyzer, from fvcore) and Paddle's ``paddle.flops`` count
one per multiply-add, so the numbers in their model zoos are MACs = FLOPs / 2; :class:`FlopsReport` gives both.
Normalisation, activations, pooling and other element-wise ops have no formula there and are not counted (they are
a few percent of a CNN's work); operators of other libraries (``torchvision::roi_align``, custom NMS) are not
either, and the report names the ones that ran so that a gap is visible, never silent.

Per-module numbers: each counted operator is booked to the innermost module whose forward is running when it runs
(its own forward, outside its submodules), and a module's row is the sum over its subtree in ``named_modules`` —
so every row is the sum of the rows below it plus its own part, the root equals the total, no row is negative,
and a module that one graph reaches under two names (an export wrapper's ``self.head = detector.bbox_head``)
is booked once, under its first name. (``FlopCounterMode``'s own per-module table names such a module by the path
it was last reached through, and books nothing to the other: a detection head showed 0 FLOPs and its parent a
negative remainder.) Parameters are those of the modules that ran, so an unused branch (a GAN's discriminator
beside the generator that is measured) is not charged to the forward that was measured.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

__all__ = ["FlopsRow", "FlopsReport", "count_flops", "format_report", "human"]

OWN_SUFFIX = " (outside submodules)"
_COUNTED_NAMESPACES = ("aten", "prims")


@dataclass(frozen=True)
class FlopsRow:
    """One module of the per-module table.

    ``path`` is the module's name in ``model.named_modules()`` ("" for the model itself); ``flops`` include its
    submodules'. An ``own`` row holds the FLOPs that ``path``'s forward spends outside its submodules (functional
    calls), so that the children of a row always add up to it.
    """

    path: str
    type: str
    depth: int
    params: int
    flops: int
    own: bool = False


@dataclass
class FlopsReport:
    """What :func:`count_flops` measured.

    Attributes:
        flops: FLOPs of the forward (2 per multiply-add).
        params: parameters of the modules that ran (each shared parameter once).
        model_params: every parameter of the model given (ran or not).
        rows: every module that ran, depth-first in ``named_modules`` order, root first (see :meth:`table`).
        by_op: FLOPs per counted operator (``aten.convolution``, ``aten.mm``, ...).
        uncounted_ops: operators of other libraries that ran without a FLOP formula, with their call counts.
        inputs: (name, shape, dtype) of each input tensor.
    """

    flops: int
    params: int
    model_params: int
    rows: list[FlopsRow]
    by_op: dict[str, int] = field(default_factory=dict)
    uncounted_ops: dict[str, int] = field(default_factory=dict)
    inputs: list[tuple[str, list[int], str]] = field(default_factory=list)

    @property
    def macs(self) -> float:
        """Multiply-adds = FLOPs / 2: what MMDetection and Paddle publish under the name "FLOPs"."""
        return self.flops / 2

    def table(self, depth: int = 3) -> list[FlopsRow]:
        """The rows down to ``depth`` (0: the model only), each expanded row followed by its children and, when
        they do not cover it, an ``own`` row with the rest; so every expanded row equals the sum of the rows one
        level below it, and the root row equals :attr:`flops`.

        Args:
            depth: how many levels of submodules to show (>= 0).

        Returns:
            The rows in display order.
        """
        if depth < 0:
            raise ValueError(f"depth must be >= 0, got {depth}")
        children: dict[str, list[FlopsRow]] = {}
        for row in self.rows[1:]:
            children.setdefault(_parent(row.path), []).append(row)
        out: list[FlopsRow] = []

        def visit(row: FlopsRow) -> None:
            out.append(row)
            kids = children.get(row.path, []) if row.depth < depth else []
            for kid in kids:
                visit(kid)
            rest = row.flops - sum(k.flops for k in kids)
            if kids and rest:
                out.append(FlopsRow(row.path, row.type, row.depth + 1, 0, rest, own=True))

        if self.rows:
            visit(self.rows[0])
        return out


def _parent(path: str) -> str:
    return path.rsplit(".", 1)[0] if "." in path else ""


def _ancestors(path: str) -> list[str]:
    """``"a.b.c"`` -> ``["a", "a.b"]`` (the root "" left out)."""
    parts = path.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


class _OpRecorder(TorchDispatchMode):
    """Counts the operators outside aten/prims that run (they have no FLOP formula): the report names them."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's protocol
        namespace = getattr(func, "namespace", "aten")
        if namespace not in _COUNTED_NAMESPACES:
            self.ops[f"{namespace}.{func._opname}"] += 1
        return func(*args, **(kwargs or {}))


def _as_args(inputs: Any) -> tuple[tuple, dict]:
    if isinstance(inputs, torch.Tensor):
        return (inputs,), {}
    if isinstance(inputs, Mapping):
        return (), dict(inputs)
    if isinstance(inputs, Sequence):
        return tuple(inputs), {}
    raise TypeError(f"inputs must be a tensor, a sequence of tensors or a mapping of name -> tensor, "
                    f"got {type(inputs).__name__}")


def count_flops(model: torch.nn.Module, inputs: Any, input_names: Sequence[str] | None = None) -> FlopsReport:
    """Run ``model`` once on ``inputs`` (under ``torch.no_grad``, in the mode the model is in) and count its
    parameters and FLOPs, in total and per module.

    Args:
        model: the module to measure (e.g. an export graph, a backbone, a pruned model).
        inputs: one tensor (``model(x)``), a sequence of tensors (``model(*inputs)``) or a mapping of name ->
            tensor (``model(**inputs)``); any shape and dtype the model takes (float32 images [B, 3, H, W], clips
            [B, V, T, 3, H, W], int64 labels, ...).
        input_names: names of the positional inputs for the report (default ``input``, ``input_1``, ...).

    Returns:
        The :class:`FlopsReport` (``flops`` counts 2 per multiply-add; ``macs`` is half of it).
    """
    args, kwargs = _as_args(inputs)
    tensors = list(args) + list(kwargs.values())
    names = list(kwargs) if kwargs else [
        (input_names[i] if input_names and i < len(input_names) else ("input" if i == 0 else f"input_{i}"))
        for i in range(len(args))]
    shapes = [(n, list(t.shape), str(t.dtype).replace("torch.", "")) for n, t in zip(names, tensors)
              if isinstance(t, torch.Tensor)]
    called: set[int] = set()
    stack: list[int] = []

    def enter(module: torch.nn.Module, _args: Any) -> None:
        called.add(id(module))
        stack.append(id(module))

    def leave(module: torch.nn.Module, _args: Any, _out: Any) -> None:
        if stack and stack[-1] == id(module):
            stack.pop()

    pre = torch.nn.modules.module.register_module_forward_pre_hook(enter)
    post = torch.nn.modules.module.register_module_forward_hook(leave, always_call=True)
    counter = _InnermostCounter(stack)
    recorder = _OpRecorder()
    try:
        with torch.no_grad(), counter, recorder:
            model(*args, **kwargs)
    finally:
        pre.remove()
        post.remove()
    global_counts = counter.get_flop_counts().get("Global", {})
    total = int(sum(global_counts.values()))
    rows, used = _rows(model, called, counter.own, total)
    return FlopsReport(flops=total, params=used, model_params=_param_count(model.parameters()), rows=rows,
                       by_op={str(k): int(v) for k, v in global_counts.items()},
                       uncounted_ops=dict(recorder.ops.most_common()), inputs=shapes)


class _InnermostCounter(FlopCounterMode):
    """``FlopCounterMode`` that also books each operator's FLOPs to the innermost running module (``own``, keyed by
    ``id(module)``; ``None``: outside every module), from the module stack the forward hooks keep."""

    def __init__(self, stack: list[int]) -> None:
        super().__init__(display=False, depth=None)
        self.stack = stack
        self.own: Counter[int | None] = Counter()

    def _count_flops(self, func_packet, out, args, kwargs):  # noqa: ANN001, ANN202 - torch's private hook
        if func_packet in self.flop_registry:
            flops = self.flop_registry[func_packet](*args, **kwargs, out_val=out)
            self.own[self.stack[-1] if self.stack else None] += int(flops)
        return super()._count_flops(func_packet, out, args, kwargs)


def _param_count(params: Any) -> int:
    seen: dict[int, int] = {}
    for p in params:
        seen.setdefault(id(p), p.numel())
    return sum(seen.values())


def _rows(model: torch.nn.Module, called: set[int], own: Mapping[int | None, int],
          total: int) -> tuple[list[FlopsRow], int]:
    """The rows of the modules that ran (depth-first) with their used parameters; and the used total.

    ``own`` holds the FLOPs booked to each module's own forward (by ``id``; ``None`` and modules outside ``model``'s
    tree go to the root); a row's FLOPs are the sum over its subtree, so rows add up by construction.
    """
    modules = list(model.named_modules())  # each module once, under its first name
    path_of = {id(module): path for path, module in modules}
    seen_params: set[int] = set()
    direct: dict[str, int] = {}
    for path, module in modules:
        count = 0
        if id(module) in called:
            for p in module.parameters(recurse=False):
                if id(p) not in seen_params:
                    seen_params.add(id(p))
                    count += p.numel()
        direct[path] = count
    inclusive: dict[str, int] = dict(direct)
    flops: dict[str, int] = {path: 0 for path, _ in modules}
    for key, value in own.items():
        flops[path_of.get(key, "")] += int(value)  # type: ignore[arg-type]
    for path, _ in reversed(modules[1:]):  # children after parents in named_modules: add bottom-up
        inclusive[_parent(path)] = inclusive.get(_parent(path), 0) + inclusive[path]
        flops[_parent(path)] += flops[path]
    if flops[""] != total:  # the same operators, booked twice: a bug here, never a silent table
        raise RuntimeError(f"FLOPs per module add up to {flops['']}, the total is {total}")
    # a container that did not run itself (a ModuleList, a model whose parts a wrapper calls one by one) is shown
    # when something under it ran; its FLOPs are its children's (it has no forward of its own that ran)
    ran = {path for path, module in modules if id(module) in called}
    shown = {""} | {p for path in ran for p in _ancestors(path)} | ran
    rows = [FlopsRow(path, type(module).__name__, 0 if not path else path.count(".") + 1, inclusive[path],
                     flops[path]) for path, module in modules if path in shown]
    return rows, inclusive[""]


def human(value: float, unit: str = "") -> str:
    """A count for people: ``1234567`` -> ``"1.23 M"`` (K, M, G, T: powers of 1000, as model zoos print them).

    Args:
        value: the count.
        unit: appended after the prefix (``"FLOPs"`` -> ``"1.23 GFLOPs"``).

    Returns:
        The text.
    """
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {suffix}{unit}"
    return f"{value:.0f} {unit}".rstrip() if float(value).is_integer() else f"{value:.2f} {unit}".rstrip()


def format_report(report: FlopsReport, depth: int = 3, title: str | None = None) -> str:
    """The report as text, for a terminal: inputs, parameters, FLOPs and MACs (each labelled with how it is
    counted, so that a number is never compared with a zoo's number of the other kind), what was not counted, then
    the per-module table.

    Args:
        report: what :func:`count_flops` returned.
        depth: levels of submodules in the table (see :meth:`FlopsReport.table`).
        title: a first line (the config and the model), if any.

    Returns:
        The lines joined with newlines; the table's columns: module path (indented by depth), type, params, FLOPs,
        % of the total FLOPs.
    """
    lines = [title] if title else []
    for name, shape, dtype in report.inputs:
        lines.append(f"input {name}: {shape} {dtype}")
    unused = report.model_params - report.params
    note = f" ({human(unused)} more in modules this forward does not run)" if unused else ""
    lines.append(f"parameters: {human(report.params)} ({report.params:,}){note}")
    lines.append(f"FLOPs: {human(report.flops)} ({report.flops:,}) - torch.utils.flop_counter, 2 FLOPs per "
                 "multiply-add")
    lines.append(f"MACs:  {human(report.macs)} ({int(report.macs):,}) - multiply-adds = FLOPs / 2: what MMDetection's "
                 "get_flops and Paddle's flops print (and their model zoos publish) as \"FLOPs\"")
    lines.append("counted: matrix products, convolutions, attention; not counted: normalisation, activations, "
                 "pooling, interpolation, element-wise ops")
    if report.uncounted_ops:
        ops = ", ".join(f"{k} x{v}" for k, v in report.uncounted_ops.items())
        lines.append(f"ran without a FLOP formula (not counted): {ops}")
    header = ("module", "type", "params", "FLOPs", "% FLOPs")
    body = []
    for row in report.table(depth):
        label = ("  " * row.depth) + (f"[{row.path or '(root)'}{OWN_SUFFIX}]" if row.own else (row.path or "(root)"))
        share = 100.0 * row.flops / report.flops if report.flops else 0.0
        body.append((label, "" if row.own else row.type, "" if row.own else human(row.params), human(row.flops),
                     f"{share:.2f}%"))
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    fmt = [str.ljust, str.ljust, str.rjust, str.rjust, str.rjust]
    lines.append("")
    for i, r in enumerate([header, *body]):
        lines.append("  ".join(fmt[j](r[j], widths[j]) for j in range(len(r))).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
