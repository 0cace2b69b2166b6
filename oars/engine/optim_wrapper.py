"""Mixed-precision optimizer wrapper that works on CUDA (FP16 + dynamic loss scaling) and CPU (bf16).

mmengine's ``AmpOptimWrapper`` asserts a GPU, so ``--amp`` could not run on a CPU machine.
This wrapper picks the device at construction: on CUDA it autocasts to float16 (or the
given dtype) with a ``torch.amp.GradScaler``; on the CPU it autocasts to bfloat16, which
needs no loss scaling. Steps the scaler skips (inf/NaN gradients) are counted and logged, with a
dynamic scale and with a fixed one alike; ``consecutive_skipped_steps`` is what ``NaNGuardHook`` reads
to stop a run whose loss stays non-finite (the scaler would otherwise skip steps forever).
"""

from __future__ import annotations

import logging
from contextlib import contextmanager

import torch
from mmengine.logging import MessageHub, print_log
from mmengine.optim import OptimWrapper
from torch import nn

from oars.registry import OPTIM_WRAPPERS

_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


@OPTIM_WRAPPERS.register_module()
class MixedPrecisionOptimWrapper(OptimWrapper):
    """``OptimWrapper`` with autocast; FP16 + dynamic loss scaling on CUDA, bfloat16 on CPU.

    Args:
        dtype: autocast dtype name; ``None`` means float16 on CUDA and bfloat16 on CPU.
        loss_scale: ``'dynamic'``, a fixed float, or a dict of ``GradScaler`` arguments (CUDA float16 only).
        device: ``'cuda'`` or ``'cpu'``; ``None`` picks CUDA when available.
    """

    def __init__(self, dtype: str | None = None, loss_scale: str | float | dict = "dynamic",
                 device: str | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.device_type = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if dtype is None:
            dtype = "float16" if self.device_type == "cuda" else "bfloat16"
        if dtype not in _DTYPES:
            raise ValueError(f"optim_wrapper.dtype: expected one of {sorted(_DTYPES)}, got {dtype!r}")
        self.cast_dtype = _DTYPES[dtype]
        if self.device_type == "cpu" and self.cast_dtype == torch.float16:
            raise ValueError("optim_wrapper.dtype: float16 autocast is not supported on the CPU; use bfloat16")
        self.loss_scaler: torch.amp.GradScaler | None = None
        self._fixed_scale = None
        if self.cast_dtype == torch.float16:
            if loss_scale == "dynamic":
                self.loss_scaler = torch.amp.GradScaler(self.device_type)
            elif isinstance(loss_scale, (int, float)):
                self._fixed_scale = float(loss_scale)
                self.loss_scaler = torch.amp.GradScaler(self.device_type, init_scale=float(loss_scale))
            elif isinstance(loss_scale, dict):
                self.loss_scaler = torch.amp.GradScaler(self.device_type, **loss_scale)
            else:
                raise ValueError(f"optim_wrapper.loss_scale: expected 'dynamic', a number or a dict: {loss_scale!r}")
        self.skipped_steps = 0  # all steps the scaler skipped in this process
        self.consecutive_skipped_steps = 0  # skipped steps since the last one that updated the weights

    def backward(self, loss: torch.Tensor, **kwargs) -> None:
        if self.loss_scaler is not None:
            loss = self.loss_scaler.scale(loss)
        loss.backward(**kwargs)
        self._inner_count += 1

    def step(self, **kwargs) -> None:
        if self.loss_scaler is None:
            super().step(**kwargs)
            return
        if self.clip_grad_kwargs:
            self.loss_scaler.unscale_(self.optimizer)
            self._clip_grad()
        scale_before = self.loss_scaler.get_scale()
        self.loss_scaler.step(self.optimizer, **kwargs)
        skipped = self._scaler_found_inf()
        self.loss_scaler.update(self._fixed_scale)
        scale_after = self.loss_scaler.get_scale()
        if skipped is None:  # scaler state not readable: a lowered scale is the sign of a skipped step
            skipped = scale_after < scale_before
        if skipped:
            self.skipped_steps += 1
            self.consecutive_skipped_steps += 1
            change = f"{scale_before:g} (fixed)" if self._fixed_scale is not None else \
                f"{scale_before:g} -> {scale_after:g}"
            print_log(f"FP16: non-finite gradients, step skipped, loss scale {change} "
                      f"({self.consecutive_skipped_steps} in a row, {self.skipped_steps} so far)",
                      logger="current", level=logging.WARNING)
        else:
            self.consecutive_skipped_steps = 0
        hub = MessageHub.get_current_instance()
        hub.update_scalar("train/loss_scale", scale_after)

    def _scaler_found_inf(self) -> bool | None:
        """Whether the scaler's last ``step`` found inf/NaN gradients (and so skipped it); ``None`` when its
        per-optimizer record is missing. Read before ``update()``, which clears it. ``GradScaler`` keeps this in
        ``_found_inf_per_device``, its only record of the decision: with a fixed scale the scale itself
        does not change when a step is skipped."""
        if not self.loss_scaler.is_enabled():
            return False
        try:
            found = self.loss_scaler._found_inf_per_device(self.optimizer)
        except (AttributeError, KeyError):
            return None
        return any(bool(v.item()) for v in found.values())

    def state_dict(self) -> dict:
        state = super().state_dict()
        if self.loss_scaler is not None:
            state["loss_scaler"] = self.loss_scaler.state_dict()
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = dict(state_dict)
        scaler_state = state_dict.pop("loss_scaler", None)
        if scaler_state is not None and self.loss_scaler is not None:
            self.loss_scaler.load_state_dict(scaler_state)
        if "base_param_settings" in state_dict:
            self.base_param_settings = state_dict.pop("base_param_settings")
        self.optimizer.load_state_dict(state_dict)

    @contextmanager
    def optim_context(self, model: nn.Module):
        with super().optim_context(model), torch.autocast(self.device_type, dtype=self.cast_dtype):
            yield
