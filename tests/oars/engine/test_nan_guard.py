"""NaN guard under a loss scaler: skipped steps are counted (dynamic and fixed scale) and the run stops
after ``max_skipped_steps`` in a row, naming the loss term that became non-finite first."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
import torch
from demo_utils import DEMO_CFG, demo_overrides
from mmengine.hooks import Hook
from torch import nn
from training_hooks import PoisonWeights

from oars.engine.entry import load
from oars.engine.hooks import NaNGuardHook, NonFiniteLossError
from oars.engine.optim_wrapper import MixedPrecisionOptimWrapper
from oars.engine.runner import build_runner, prepare_config
from oars.errors import OarsError


def _give_scaler(wrapper: MixedPrecisionOptimWrapper, fixed: float | None = None) -> None:
    """What the wrapper builds for CUDA float16, on the CPU (GradScaler('cpu') runs the same unscale/skip)."""
    wrapper.loss_scaler = torch.amp.GradScaler("cpu", init_scale=fixed or 2.0**16)
    wrapper._fixed_scale = fixed


def _step(model, wrapper, factor: float) -> None:
    with wrapper.optim_context(model):
        loss = model(torch.ones(2, 4)).float().sum() * factor
    wrapper.update_params(loss)


@pytest.mark.parametrize("fixed", [None, 128.0])
def test_wrapper_counts_consecutive_skipped_steps(fixed):
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    wrapper = MixedPrecisionOptimWrapper(optimizer=torch.optim.SGD(model.parameters(), lr=0.1), device="cpu")
    _give_scaler(wrapper, fixed)
    w0 = model.weight.detach().clone()
    _step(model, wrapper, float("inf"))
    _step(model, wrapper, float("nan"))
    assert (wrapper.skipped_steps, wrapper.consecutive_skipped_steps) == (2, 2)
    assert torch.equal(model.weight, w0)  # skipped: no update
    if fixed is not None:
        assert wrapper.loss_scaler.get_scale() == fixed  # a fixed scale does not drop, the step is still skipped
    _step(model, wrapper, 1.0)
    assert (wrapper.skipped_steps, wrapper.consecutive_skipped_steps) == (2, 0)
    assert not torch.equal(model.weight, w0)


def _fake_runner(iteration: int, clip: dict | None = None, skipped: int | None = None):
    wrapper = SimpleNamespace(clip_grad_kwargs=clip or {})
    if skipped is not None:
        wrapper.loss_scaler, wrapper.consecutive_skipped_steps = object(), skipped
    return SimpleNamespace(iter=iteration, epoch=0, optim_wrapper=wrapper)


def test_first_term_is_the_earliest_to_turn_non_finite():
    hook = NaNGuardHook(max_skipped_steps=3)
    nan, inf = float("nan"), float("inf")
    hook.after_train_iter(_fake_runner(9, skipped=1), 0, outputs={"loss": inf, "loss_cls": 1.0, "loss_bbox": inf})
    hook.after_train_iter(_fake_runner(10, skipped=2), 0, outputs={"loss": nan, "loss_cls": nan, "loss_bbox": inf})
    with pytest.raises(NonFiniteLossError) as err:
        hook.after_train_iter(_fake_runner(11, skipped=3), 0,
                              outputs={"loss": nan, "loss_cls": nan, "loss_bbox": nan})
    msg = str(err.value)
    assert "loss became non-finite at iteration 10 (epoch 1), first in loss_bbox" in msg
    assert "loss_cls=nan from iteration 11" in msg and "3 steps in a row up to iteration 12" in msg


def test_a_step_that_updates_resets_the_stretch():
    hook = NaNGuardHook(max_skipped_steps=2)
    hook.after_train_iter(_fake_runner(0, skipped=1), 0, outputs={"loss": float("nan"), "loss_a": float("nan")})
    hook.after_train_iter(_fake_runner(1, skipped=0), 0, outputs={"loss": 1.0, "loss_a": 1.0})
    hook.after_train_iter(_fake_runner(2, skipped=1), 0, outputs={"loss": float("inf"), "loss_a": float("inf")})
    with pytest.raises(NonFiniteLossError, match="at iteration 3 .*first in loss_a"):
        hook.after_train_iter(_fake_runner(3, skipped=2), 0, outputs={"loss": float("inf"), "loss_a": 1.0})


def test_wrapper_without_a_skip_count_counts_non_finite_iterations():
    """mmengine's AmpOptimWrapper (a config may name it on CUDA) has a scaler but no skip counter."""
    hook = NaNGuardHook(max_skipped_steps=2)
    runner = _fake_runner(0)
    runner.optim_wrapper.loss_scaler = object()
    hook.after_train_iter(runner, 0, outputs={"loss": float("nan")})
    runner.iter = 1
    with pytest.raises(NonFiniteLossError, match="skipped 2 steps in a row up to iteration 2"):
        hook.after_train_iter(runner, 0, outputs={"loss": float("nan")})


def test_advice_does_not_suggest_clipping_when_the_config_clips():
    hook = NaNGuardHook()
    with pytest.raises(NonFiniteLossError) as err:
        hook.after_train_iter(_fake_runner(4, clip={"max_norm": 35, "norm_type": 2}), 0,
                              outputs={"loss": float("nan"), "loss_cls": float("nan")})
    msg = str(err.value)
    assert "add gradient clipping" not in msg and "already clipped: optim_wrapper.clip_grad max_norm=35" in msg
    with pytest.raises(NonFiniteLossError, match="add gradient clipping"):
        NaNGuardHook().after_train_iter(_fake_runner(4), 0, outputs={"loss": float("nan")})


def test_max_skipped_steps_is_checked():
    with pytest.raises(OarsError, match="NaNGuardHook.max_skipped_steps: expected a whole number >= 1, got 0"):
        NaNGuardHook(max_skipped_steps=0)


class ScalerOnCpu(Hook):
    """Gives the CPU wrapper the FP16 loss scaler it would have on CUDA."""

    def before_train(self, runner):
        _give_scaler(runner.optim_wrapper)


def test_loss_scaler_run_stops_after_max_skipped_steps(demo_data, tmp_path):
    cfg = load(DEMO_CFG, demo_overrides(demo_data, epochs=2, **{"optim_wrapper.type": "MixedPrecisionOptimWrapper"}))
    cfg.custom_hooks.append({"type": "NaNGuardHook", "max_skipped_steps": 3})  # the configured one wins
    cfg = prepare_config(cfg, work_dir=str(tmp_path))
    assert [h for h in cfg.custom_hooks if h["type"] == "NaNGuardHook"] == [
        {"type": "NaNGuardHook", "max_skipped_steps": 3}]
    runner = build_runner(cfg)
    runner.register_hook(ScalerOnCpu(), priority="VERY_HIGH")
    runner.register_hook(PoisonWeights(), priority="VERY_HIGH")
    with pytest.raises(NonFiniteLossError) as err:
        runner.train()  # before: the guard was off under a scaler and all 8 iterations ran
    msg = str(err.value)
    assert "loss became non-finite at iteration 2 (epoch 1), first in decode.loss_ce" in msg
    assert "skipped 3 steps in a row up to iteration 4" in msg
    assert runner.optim_wrapper.consecutive_skipped_steps == 3
    assert not os.path.exists(tmp_path / "epoch_1.pth")  # stopped before the end-of-epoch checkpoint
