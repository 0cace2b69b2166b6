"""Stop training when a loss becomes NaN/inf, naming the iteration and the loss term.

Without a loss scaler (FP32, CPU bfloat16) the first non-finite loss stops the run. Under FP16 a
non-finite value now and then is expected: the scaler skips that step and lowers the scale. A loss
that *stays* non-finite, though, would make the scaler skip every step while checkpoints keep being
written, so the run stops after ``max_skipped_steps`` consecutive skipped steps (counted by the
optimizer wrapper, with a dynamic or a fixed scale) with the same message.

Which term "became non-finite first": the term that was non-finite at the earliest iteration of
the current stretch of non-finite steps; terms that turned non-finite at the same iteration are
ordered as the model returns them (its loss dict order). The total ``loss`` is named only when no
single term is non-finite.
"""

from __future__ import annotations

import math

import torch
from mmengine.hooks import Hook
from mmengine.optim import OptimWrapperDict

from oars.errors import OarsError
from oars.registry import HOOKS


class NonFiniteLossError(OarsError):
    """Training produced a NaN or infinite loss."""


def _wrappers(wrapper) -> list:
    return list(wrapper.values()) if isinstance(wrapper, OptimWrapperDict) else [wrapper]


def _advice(wrappers: list) -> str:
    clip = next((w.clip_grad_kwargs for w in wrappers if getattr(w, "clip_grad_kwargs", None)), None)
    if clip:
        shown = ", ".join(f"{k}={v}" for k, v in clip.items() if k != "type")
        return (f"Lower the learning rate or check the data at that iteration (gradients are already clipped: "
                f"optim_wrapper.clip_grad {shown}).")
    return ("Lower the learning rate, add gradient clipping (optim_wrapper.clip_grad.max_norm) "
            "or check the data at that iteration.")


@HOOKS.register_module()
class NaNGuardHook(Hook):
    """Raise :class:`NonFiniteLossError` when a logged loss term is not finite (at once without a loss
    scaler; after ``max_skipped_steps`` consecutive skipped steps with one).

    Args:
        max_skipped_steps: consecutive steps a loss scaler may skip before the run stops.
    """

    priority = "ABOVE_NORMAL"  # before CheckpointHook: no checkpoint is written at the failing iteration

    def __init__(self, max_skipped_steps: int = 50) -> None:
        if isinstance(max_skipped_steps, bool) or not isinstance(max_skipped_steps, int) or max_skipped_steps < 1:
            raise OarsError(f"custom_hooks NaNGuardHook.max_skipped_steps: expected a whole number >= 1, "
                            f"got {max_skipped_steps!r}")
        self.max_skipped_steps = max_skipped_steps
        self._first_bad: dict[str, tuple[int, float]] = {}  # term -> (iteration, value) in this stretch
        self._bad_iters = 0  # consecutive iterations with a non-finite loss (wrappers that count no skips)

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs: dict | None = None) -> None:
        if not outputs:
            return
        values = {k: float(v.detach()) if torch.is_tensor(v) else float(v) for k, v in outputs.items() if "loss" in k}
        bad = {k: v for k, v in values.items() if not math.isfinite(v)}
        iteration = runner.iter + 1
        for k, v in bad.items():
            self._first_bad.setdefault(k, (iteration, v))
        self._bad_iters = self._bad_iters + 1 if bad else 0
        wrappers = _wrappers(runner.optim_wrapper)
        scaled = [w for w in wrappers if getattr(w, "loss_scaler", None) is not None]
        if not scaled:
            if bad:
                raise NonFiniteLossError(self._message(runner, wrappers, values, skipped=0))
            self._first_bad.clear()
            return
        skipped = max(getattr(w, "consecutive_skipped_steps", self._bad_iters) for w in scaled)
        if skipped == 0:
            self._first_bad.clear()
        elif skipped >= self.max_skipped_steps:
            raise NonFiniteLossError(self._message(runner, wrappers, values, skipped=skipped))

    def _message(self, runner, wrappers: list, values: dict[str, float], skipped: int) -> str:
        order = list(values)
        terms = {k: v for k, v in self._first_bad.items() if k != "loss"} or dict(self._first_bad)
        ranked = sorted(terms, key=lambda k: (terms[k][0], order.index(k) if k in order else len(order)))
        epoch = f"(epoch {runner.epoch + 1})"
        if ranked:
            first = ranked[0]
            listed = ", ".join(f"{k}={terms[k][1]}" + (f" from iteration {terms[k][0]}" if skipped else "")
                               for k in ranked)
            head = (f"loss became non-finite at iteration {terms[first][0]} {epoch}, first in {first}: "
                    f"{listed}.")
        else:  # FP16 overflow in the backward pass: the loss itself stayed finite
            listed = ", ".join(f"{k}={v:.4g}" for k, v in values.items())
            head = f"gradients became non-finite with finite loss terms {epoch}: {listed}."
        tail = (f" The FP16 loss scaler skipped {skipped} steps in a row up to iteration {runner.iter + 1} "
                f"(NaNGuardHook.max_skipped_steps={self.max_skipped_steps}); the weights did not change in "
                "those steps." if skipped else "")
        return f"{head}{tail} {_advice(wrappers)}"
