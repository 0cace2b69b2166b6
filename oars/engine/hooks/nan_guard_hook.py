"""Stop training when a loss becomes NaN/inf, naming the iteration and the loss term."""

from __future__ import annotations

import math

import torch
from mmengine.hooks import Hook

from oars.errors import OarsError
from oars.registry import HOOKS


class NonFiniteLossError(OarsError):
    """Training produced a NaN or infinite loss."""


@HOOKS.register_module()
class NaNGuardHook(Hook):
    """Raise :class:`NonFiniteLossError` when a logged loss term is not finite.

    Under FP16 with a dynamic loss scaler a non-finite value is expected now and then: the
    scaler skips that step and lowers the scale (the optimizer wrapper logs it), so the
    check is left to the scaler there.
    """

    priority = "ABOVE_NORMAL"

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs: dict | None = None) -> None:
        if not outputs:
            return
        wrapper = runner.optim_wrapper
        if getattr(wrapper, "loss_scaler", None) is not None:
            return
        values = {k: float(v.detach()) if torch.is_tensor(v) else float(v) for k, v in outputs.items() if "loss" in k}
        bad = {k: v for k, v in values.items() if not math.isfinite(v)}
        if bad:
            terms = ", ".join(f"{k}={v}" for k, v in bad.items())
            raise NonFiniteLossError(
                f"loss became non-finite at iteration {runner.iter + 1} (epoch {runner.epoch + 1}): {terms}. "
                "Lower the learning rate, add gradient clipping (optim_wrapper.clip_grad.max_norm) "
                "or check the data of this batch.")
