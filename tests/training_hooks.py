"""Hooks the training tests register to break a run on purpose (a kill, NaN weights)."""

from __future__ import annotations

import torch
from mmengine.hooks import Hook


class CrashAt(Hook):
    """Simulates a kill: raises KeyboardInterrupt before the given (global, 0-based) iteration."""

    def __init__(self, at_iter: int):
        self.at_iter = at_iter

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        if runner.iter == self.at_iter:
            raise KeyboardInterrupt("simulated kill")


class PoisonWeights(Hook):
    """Fills the segmentor's first decode-head parameter with NaN before iteration 1 (0-based)."""

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        if runner.iter == 1:
            model = runner.model.module if hasattr(runner.model, "module") else runner.model
            with torch.no_grad():
                next(model.decode_head.parameters()).fill_(float("nan"))
