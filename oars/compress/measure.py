"""What the variant table measures: FLOPs, parameters, size on disk and ONNX Runtime latency.

FLOPs go through one function, :func:`count_flops`: the core's counter (``oars.analysis.flops.count_flops``) when it
is installed, else ``torch.utils.flop_counter`` directly, so pruning targets and the table always use the same count.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from oars.analysis.flops import count_flops as core_count

ForwardFn = Callable[[nn.Module, Any], Any]


def tensor_forward(model: nn.Module, inputs: Any) -> Any:
    """The raw-output forward of a task model (``mode='tensor'``): what is exported, traced and counted."""
    return model(inputs, mode="tensor")


def _as_number(value: Any) -> float:
    """A FLOP count from what the counter returns: a number, ``{'total': n}`` or a report with ``.flops``."""
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, dict) and "total" in value:
        return float(value["total"])
    for attr in ("flops", "total"):  # oars.analysis.flops.FlopsReport has .flops
        total = getattr(value, attr, None)
        if isinstance(total, (int, float)):
            return float(total)
    raise TypeError(f"count_flops returned {type(value).__name__}; expected a number")


def count_flops(model: nn.Module, inputs: Any, forward_fn: ForwardFn = tensor_forward) -> float:
    """FLOPs of one forward of ``model`` on ``inputs`` (eval mode, no gradients).

    Args:
        model: the network.
        inputs: what ``forward_fn`` passes to it (a batch tensor ``[B, ...]`` float32 for the task models).
        forward_fn: how to call it (default: ``mode='tensor'``).

    Returns:
        The count for the whole batch, as a float (a multiply-add counts two, as torch's counter does).
    """
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            if forward_fn is tensor_forward:  # the core's counter (tools/get_flops.py's)
                return _as_number(core_count(model, inputs))
            with FlopCounterMode(display=False) as counter:
                forward_fn(model, inputs)
            return float(counter.get_total_flops())
    finally:
        model.train(was_training)


def count_params(model: nn.Module) -> int:
    """Number of parameters (buffers not counted)."""
    return int(sum(p.numel() for p in model.parameters()))


def file_size(path: str | None) -> int | None:
    """Bytes of ``path``, or None when it is not there."""
    return os.path.getsize(path) if path and os.path.isfile(path) else None


def ort_latency_ms(onnx_path: str, runs: int = 20, warmup: int = 3, threads: int | None = None) -> float | None:
    """Median wall time (ms) of one ONNX Runtime CPU run of ``onnx_path`` on random inputs of its static shapes.

    Why the median: the machines this runs on are shared; the median resists the odd slow run a mean would keep.
    Inputs with a dynamic dimension take 1 there. Returns None when ONNX Runtime is not installed.
    """
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError:
        return None
    opts = ort.SessionOptions()
    if threads:
        opts.intra_op_num_threads = threads
    session = ort.InferenceSession(onnx_path, opts, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {}
    for item in session.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in item.shape]
        dtype = np.float32 if "float" in item.type else np.int64
        feeds[item.name] = rng.standard_normal(shape).astype(np.float32) if dtype is np.float32 \
            else np.zeros(shape, dtype=dtype)
    for _ in range(warmup):
        session.run(None, feeds)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append((time.perf_counter() - start) * 1000.0)
    times.sort()
    return float(times[len(times) // 2])
