"""FP16 training of a segmentor on CUDA (dynamic loss scaling): skipped without a GPU."""

from __future__ import annotations

import math

import pytest
import torch
from demo_utils import DEMO_CFG, demo_overrides


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_unet_demo_trains_under_fp16_autocast(demo_data, tmp_path):
    """``--amp`` on CUDA: the optimizer wrapper is FP16 with a loss scaler, the weights stay FP32 and change, and
    the logged losses are finite (the segmentation losses sum in FP32, so FP16 logits cannot overflow them)."""
    from oars.engine.entry import train

    runner = train(DEMO_CFG, demo_overrides(demo_data, epochs=1), work_dir=str(tmp_path / "work"), amp=True)
    wrapper = runner.optim_wrapper
    assert getattr(wrapper, "cast_dtype", None) == torch.float16 and wrapper.loss_scaler is not None
    model = runner.model.module if hasattr(runner.model, "module") else runner.model
    assert all(p.dtype == torch.float32 for p in model.parameters())
    losses = runner.message_hub.get_scalar("train/loss").data[0]
    assert len(losses) > 0 and all(math.isfinite(float(v)) for v in losses)
