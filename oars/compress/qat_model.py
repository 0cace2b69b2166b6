"""Quantisation-aware training inside a model: its sub-networks captured with torch.export and given fake quantisers.

Why PT2E (torchao 0.18, ``prepare_qat_pt2e`` + ``convert_pt2e``): measured on the U-Net demo (oars/compress/qat.py's
docstring has the numbers), its converted graph exports through the dynamo exporter to a clean Q/DQ ONNX graph
with batch norms folded, which ONNX Runtime fuses into ``QLinearConv``; eager fake-quant modules leave batch norms
between Conv and Q, which blocks that fusion.

What is captured: the sub-modules the model's export-mode forward (``mode='tensor'``) calls, top-down: a direct
child of the model is captured whole when torch.export can take it (tensor arguments, every axis dynamic), else its
own children are tried. A captured module keeps its Python object (its ``loss``/``predict`` methods still work);
only its ``forward`` is routed through the prepared graph, which shares the module's parameters and buffers, so
the optimizer, the checkpoints and a later load see the same tensors. The fake quantisers' state lives under
``qat_graphs.*`` in the state dict: a QAT checkpoint does not load into the float model by mistake.

Training mode runs the prepared graph (fake quantisers, batch norm folded on the fly); eval mode runs a converted
copy (``convert_pt2e``: real Q/DQ ops, batch norms folded), re-made each time the model enters eval mode or loads
a state dict, so validation and export see what will be deployed.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import time
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_map

from oars.engine.checkpoint import checkpoint_mismatch, load_checkpoint_file, state_dict_from_checkpoint
from oars.errors import OarsError
from oars.extras import require_extra
from oars.registry import MODELS

log = logging.getLogger(__name__)
QAT_STATE_PREFIX = "qat_graphs."
QUANTIZERS = ("xnnpack", "x86")
QAT_FEATURE = "quantisation-aware training (tools/compress.py --method qat)"
_QUANTIZABLE = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear, nn.ConvTranspose2d)


def make_quantizer(name: str) -> Any:
    """The torchao PT2E quantizer ``name`` configured for QAT: symmetric int8 with per-channel weights.

    Args:
        name: 'xnnpack' (symmetric activations, zero point 0: what TensorRT's explicit quantization and ONNX
            Runtime's QLinearConv both take) or 'x86' (asymmetric uint8 activations, the x86 inductor recipe).

    Returns:
        A ``torchao.quantization.pt2e.quantizer.Quantizer``.
    """
    if name == "xnnpack":
        xnnpack = require_extra("torchao.testing.pt2e._xnnpack_quantizer", QAT_FEATURE)
        config = xnnpack.get_symmetric_quantization_config(is_per_channel=True, is_qat=True)
        return xnnpack.XNNPACKQuantizer().set_global(config)
    if name == "x86":
        x86 = require_extra("torchao.quantization.pt2e.quantizer.x86_inductor_quantizer", QAT_FEATURE)
        return x86.X86InductorQuantizer().set_global(x86.get_default_x86_inductor_quantization_config(is_qat=True))
    raise OarsError(f"model.qat.quantizer must be one of {list(QUANTIZERS)}, got {name!r}")


class QATGraph(nn.Module):
    """One captured sub-module: the prepared graph (held outside the module tree: its parameters are the captured
    module's own) and its fake quantisers (registered here, so they are saved and loaded).

    ``convert``: eval mode runs a converted copy (real Q/DQ ops, what the INT8 export traces), re-made whenever
    this module enters eval mode or loads a state dict; otherwise eval mode runs the prepared graph with its
    observers frozen (validation during QAT sees the fake-quantised model at its current ranges).
    """

    def __init__(self, prepared: torch.fx.GraphModule, convert: bool = False) -> None:
        super().__init__()
        object.__setattr__(self, "prepared", prepared)
        object.__setattr__(self, "converted", None)
        self.convert = convert
        for name, child in prepared.named_children():
            if name.startswith("activation_post_process"):
                self.add_module(name, child)
        self.register_load_state_dict_post_hook(lambda module, _keys: module.refresh())

    def train(self, mode: bool = True) -> QATGraph:
        """Observers learn ranges only in training mode; see the class docstring for eval mode."""
        super().train(mode)
        self.refresh()
        return self

    def refresh(self) -> None:
        """Observers on in training mode, off in eval mode; in eval mode with ``convert``, re-convert."""
        convert_pt2e = require_extra("torchao.quantization.pt2e.quantize_pt2e", QAT_FEATURE).convert_pt2e

        for child in self.children():
            for fq in child.modules():
                if hasattr(fq, "observer_enabled"):
                    fq.observer_enabled[0] = int(self.training)
        _set_graph_mode(self.prepared, self.training)
        if self.training or not self.convert:
            object.__setattr__(self, "converted", None)
            return
        with _quiet():
            converted = convert_pt2e(copy.deepcopy(self.prepared))
        object.__setattr__(self, "converted", converted)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        graph = self.prepared if self.converted is None else self.converted
        return graph(*args, **kwargs)


def _set_graph_mode(graph: torch.fx.GraphModule, training: bool) -> None:
    """Switch the dropout / batch-norm patterns of an exported graph (what ``.train()`` cannot do for it); skipped
    when it has none (the switch re-exports pattern graphs: seconds per call)."""
    names = {str(n.target) for n in graph.graph.nodes if n.op == "call_function"}
    if not any("dropout" in n or "batch_norm" in n for n in names):
        return
    pt2e = require_extra("torchao.quantization.pt2e", QAT_FEATURE)
    (pt2e.move_exported_model_to_train if training else pt2e.move_exported_model_to_eval)(graph)


class QATGraphs(nn.Module):
    """The model's captured sub-modules by name (dots replaced by '__'), registered as ``model.qat_graphs``."""


def record_calls(model: nn.Module, sample_shape: Sequence[int]) -> tuple[dict[str, tuple[tuple, dict]],
                                                                      dict[str, str]]:
    """The (args, kwargs) of the first call of every sub-module during ``model(x, mode='tensor')``, and the
    batch norms that read a convolution's output directly.

    Args:
        model: an mmengine ``BaseModel`` (its export-mode forward is ``mode='tensor'``).
        sample_shape: the shape of ``x``, float32 ``[B, C, H, W]`` (``export.input_shape``; B at least 2, so
            that torch.export does not fix the batch axis at 1): a random normal batch, the range of normalised
            images.

    Returns:
        ``({module name: (args, kwargs)} in call order, {batch-norm name: conv name})``.
    """
    calls: dict[str, tuple[tuple, dict]] = {}
    conv_outputs: dict[int, tuple[str, torch.Tensor]] = {}  # the tensor is kept so that its id is not reused
    pairs: dict[str, str] = {}
    handles = []
    for name, module in model.named_modules():
        if not name or name.startswith("data_preprocessor"):
            continue

        def hook(module: nn.Module, args: tuple, kwargs: dict, name: str = name) -> None:
            calls.setdefault(name, (args, kwargs))
            if isinstance(module, nn.BatchNorm2d) and args and id(args[0]) in conv_outputs:
                pairs.setdefault(name, conv_outputs[id(args[0])][0])

        handles.append(module.register_forward_pre_hook(hook, with_kwargs=True))
        if type(module) is nn.Conv2d:
            def remember(_module: nn.Module, _args: tuple, out: torch.Tensor, name: str = name) -> None:
                conv_outputs[id(out)] = (name, out)

            handles.append(module.register_forward_hook(remember))
    was_training = model.training
    model.eval()
    try:
        param = next(model.parameters())
        shape = [max(2, int(sample_shape[0]))] + [int(v) for v in sample_shape[1:]]  # batch 1 would be fixed
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            model(x.to(param.device, param.dtype), mode="tensor")
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    return calls, pairs


def foldable(bn: nn.Module, conv: nn.Module) -> bool:
    """Whether ``bn`` can be folded into ``conv`` (and unfolded again: :func:`unfold_state_dict`)."""
    return bool(bn.track_running_stats and bn.affine and bn.num_features == conv.out_channels)


@torch.no_grad()
def fold_batch_norms(model: nn.Module, pairs: dict[str, str]) -> list[str]:
    """Fold each batch norm of ``pairs`` ({bn name: conv name}) into its convolution and replace it by Identity.

    Why: fine-tuning from a trained checkpoint, QAT keeps the batch-norm statistics frozen (the usual last phase
    of QAT), so the convolution can carry them from the start; the captured graphs then hold no batch norm, which
    is what the INT8 graph needs (Q -> Conv -> Q, fused by ONNX Runtime) and spares torchao's conv-bn rewrite
    (tens of seconds per graph). ``w' = w * g / sqrt(v + eps)``, ``b' = (b - m) * g / sqrt(v + eps) + beta``.

    Returns:
        The folded batch-norm names.
    """
    named = dict(model.named_modules())
    folded = []
    for bn_name, conv_name in pairs.items():
        bn, conv = named[bn_name], named[conv_name]
        if not foldable(bn, conv):
            continue
        scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
        shift = bn.bias
        bias = conv.bias if conv.bias is not None else torch.zeros_like(bn.running_mean)
        conv.weight.copy_(conv.weight * scale.reshape(-1, 1, 1, 1))
        conv.bias = nn.Parameter((bias - bn.running_mean) * scale + shift)
        parent, _, leaf = bn_name.rpartition(".")
        setattr(named[parent] if parent else model, leaf, nn.Identity())
        folded.append(bn_name)
    return folded


def _dynamic_shapes(args: tuple) -> tuple:
    """Every axis of every tensor argument dynamic (``Dim.AUTO``): training batches and crops differ from the
    export input; torch.export keeps static only the axes the graph fixes."""
    return tree_map(lambda a: {i: torch.export.Dim.AUTO for i in range(a.dim())}
                    if isinstance(a, torch.Tensor) else None, args)


def _capture(module: nn.Module, args: tuple, quantizer: Any) -> torch.fx.GraphModule:
    """``prepare_qat_pt2e`` of ``module`` captured (training mode) on ``args``."""
    prepare_qat_pt2e = require_extra("torchao.quantization.pt2e.quantize_pt2e", QAT_FEATURE).prepare_qat_pt2e

    was_training = module.training
    module.train()
    try:
        with _quiet():
            graph = torch.export.export(module, args, dynamic_shapes=_dynamic_shapes(args)).module()
            return prepare_qat_pt2e(graph, quantizer)
    finally:
        module.train(was_training)


def _has_quantizable(module: nn.Module) -> bool:
    return any(isinstance(m, _QUANTIZABLE) for m in module.modules())


def prepare_qat(model: nn.Module, sample_shape: Sequence[int], quantizer: str = "xnnpack",
                modules: Sequence[str] | None = None, convert: bool = False, fake_quant: bool = True) -> list[str]:
    """Route the model's sub-modules through fake-quantised PT2E graphs, in place (see the module docstring).

    Args:
        model: the float model (its trained weights already loaded: the observers start from them).
        sample_shape: the export input shape ``[B, C, H, W]`` the calls are recorded with.
        quantizer: a name of :data:`QUANTIZERS`.
        modules: the sub-module names to capture (``model.qat.modules``); None: found top-down.
        convert: eval mode runs the converted INT8 graphs (:class:`QATGraph`; for the INT8 export).
        fake_quant: False leaves the forwards float (batch norms folded, quantisers kept in the state dict):
            the FP32 reference of a QAT checkpoint, which the INT8 graph is compared with.

    Returns:
        The names of the captured sub-modules (an error when none could be captured).
    """
    if hasattr(model, "qat_graphs"):
        raise OarsError(f"{type(model).__name__} is already prepared for quantisation-aware training")
    calls, pairs = record_calls(model, sample_shape)
    fold_batch_norms(model, pairs)
    named = dict(model.named_modules())
    graphs = QATGraphs()
    failures: dict[str, str] = {}
    q = make_quantizer(quantizer)
    if modules:
        unknown = [m for m in modules if m not in calls]
        if unknown:
            raise OarsError(f"model.qat.modules: {unknown} are not called by the export-mode forward; called: "
                            f"{[n for n in calls if '.' not in n]}")
        todo = list(modules)
    else:
        todo = [n for n in calls if "." not in n]
    captured: list[str] = []
    while todo:
        name = todo.pop(0)
        module = named[name]
        if not _has_quantizable(module):
            continue
        args, kwargs = calls[name]
        try:
            if kwargs:
                raise OarsError(f"called with keyword arguments {sorted(kwargs)}")
            start = time.perf_counter()
            prepared = _capture(module, args, q)
            log.debug("captured %s in %.1f s", name, time.perf_counter() - start)
        except Exception as err:  # torch.export raises many types; the reason is kept for the final message
            log.debug("cannot capture %s: %s", name, err)
            failures[name] = f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"
            if modules:
                raise OarsError(f"model.qat.modules: {name} cannot be captured by torch.export: {failures[name]}") \
                    from None
            prefix = name + "."
            todo[:0] = [n for n in calls if n.startswith(prefix) and "." not in n[len(prefix):]]
            continue
        holder = QATGraph(prepared, convert=convert)
        graphs.add_module(name.replace(".", "__"), holder)
        if fake_quant:
            module.forward = holder.__call__  # instance attribute: the module's own methods now reach the graph
        captured.append(name)
    if not captured:
        raise OarsError(f"{type(model).__name__}: no sub-module with Conv/Linear layers could be captured for "
                        f"quantisation-aware training; reasons: {failures or 'none has Conv/Linear layers'}")
    model.add_module("qat_graphs", graphs)
    model.train(model.training)  # each graph takes the model's mode
    return captured


def build_qat_model(qat: dict, **model: Any) -> nn.Module:
    """``type: QATModel``: the float model of the rest of the section, its weights loaded, prepared for QAT.

    Args:
        qat: ``{model_type: the float model's type, sample_shape: [B, C, H, W] (export.input_shape),
            quantizer: 'xnnpack' | 'x86', float_checkpoint: trained weights or null (a QAT checkpoint loaded
            afterwards brings them), modules: null or names, convert / fake_quant: see :func:`prepare_qat`}``.
        model: the float model's arguments (what ``model:`` held before ``type`` was replaced).

    Returns:
        The float model's own class, prepared in place (so the task's export and predict code run unchanged).
    """
    required = ("model_type", "sample_shape")
    missing = [k for k in required if not qat.get(k)]
    if missing:
        raise OarsError(f"model.qat: missing {missing} (expected {{model_type: <the float model type>, "
                        "sample_shape: [B, C, H, W], quantizer: xnnpack}})")
    built = MODELS.build({"type": qat["model_type"], **model})
    if qat.get("float_checkpoint"):
        _load_float_weights(built, str(qat["float_checkpoint"]))
    prepare_qat(built, qat["sample_shape"], qat.get("quantizer", "xnnpack"), qat.get("modules"),
                convert=bool(qat.get("convert", False)), fake_quant=bool(qat.get("fake_quant", True)))
    return built


MODELS.register_module(name="QATModel", module=build_qat_model)


def _load_float_weights(model: nn.Module, path: str) -> None:
    """The trained float weights, strictly; a QAT checkpoint here is named as such."""
    state = state_dict_from_checkpoint(load_checkpoint_file(path))
    if any(k.startswith(QAT_STATE_PREFIX) for k in state):
        raise OarsError(f"model.qat.float_checkpoint {path} is already a quantisation-aware-training checkpoint; "
                        "give the float model's checkpoint")
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise checkpoint_mismatch(path, "model.qat.float_checkpoint", err) from None


@torch.no_grad()
def unfold_state_dict(model: nn.Module, state: dict[str, torch.Tensor], sample_shape: Sequence[int]) -> dict:
    """A QAT state dict in the float model's layout: what the float config loads strictly and exports as the
    FP32 reference of the INT8 graph.

    Each folded batch norm comes back with identity statistics (weight 1, mean 0, var 1 - eps) and carries the
    folded bias (in the convolution's own bias when it has one), so ``bn(conv(x))`` computes the folded
    convolution exactly; the fake quantisers are dropped.

    Args:
        model: the float model (built from the float config; its values are not used, only its layout).
        state: the QAT checkpoint's state dict.
        sample_shape: ``[B, C, H, W]``, to find the conv -> batch-norm pairs as :func:`prepare_qat` did.

    Returns:
        The float state dict.
    """
    _, pairs = record_calls(model, sample_shape)
    named = dict(model.named_modules())
    out = {k: v for k, v in model.state_dict().items()}
    qat = {k: v for k, v in state.items() if not k.startswith(QAT_STATE_PREFIX)}
    for bn_name, conv_name in pairs.items():
        bn, conv = named[bn_name], named[conv_name]
        if not foldable(bn, conv):
            continue
        bias = qat.pop(f"{conv_name}.bias")
        in_conv = conv.bias is not None
        out[f"{conv_name}.bias"] = bias if in_conv else out.get(f"{conv_name}.bias")
        out[f"{bn_name}.bias"] = torch.zeros_like(bias) if in_conv else bias
        out[f"{bn_name}.weight"] = torch.ones_like(bias)
        out[f"{bn_name}.running_mean"] = torch.zeros_like(bias)
        out[f"{bn_name}.running_var"] = torch.full_like(bias, 1.0 - bn.eps)
        if not in_conv:
            out.pop(f"{conv_name}.bias", None)
    unknown = sorted(set(qat) - set(out))
    if unknown:
        raise OarsError(f"the QAT checkpoint has tensors the float model lacks: {unknown[:5]}")
    out.update(qat)
    return out


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """torch.export / torchao warn (deprecations) and log graph dumps: keep the console readable."""
    loggers = [logging.getLogger(n) for n in ("torch.export", "torch._dynamo", "torchao")]
    levels = [lg.level for lg in loggers]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for lg in loggers:
                lg.setLevel(logging.ERROR)
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)
