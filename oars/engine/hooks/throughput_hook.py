"""Add samples per second to the training log line (next to loss, lr, ETA and iteration time)."""

from __future__ import annotations

import time

from mmengine.dist import get_world_size
from mmengine.hooks import Hook

from oars.registry import HOOKS


def _batch_size(data_batch) -> int:
    if isinstance(data_batch, dict):
        inputs = data_batch.get("inputs")
        if inputs is not None and hasattr(inputs, "__len__"):
            return len(inputs)
        samples = data_batch.get("data_samples")
        if samples is not None and hasattr(samples, "__len__"):
            return len(samples)
    return 1


@HOOKS.register_module()
class ThroughputHook(Hook):
    """Logs ``train/samples_per_s`` (global: all processes) each iteration."""

    priority = "NORMAL"  # before LoggerHook (BELOW_NORMAL), so the line shows this iteration's value

    def __init__(self) -> None:
        self._start: float | None = None

    def before_train_epoch(self, runner) -> None:
        # Measured end to end (data loading included) from one iteration's end to the next.
        self._start = time.perf_counter()

    def after_val(self, runner) -> None:
        self._start = time.perf_counter()  # validation time is not training throughput

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        if self._start is None:
            return
        elapsed = max(time.perf_counter() - self._start, 1e-9)
        samples = _batch_size(data_batch) * get_world_size()
        runner.message_hub.update_scalar("train/samples_per_s", samples / elapsed)
        self._start = time.perf_counter()
