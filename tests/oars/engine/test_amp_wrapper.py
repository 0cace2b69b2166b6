"""MixedPrecisionOptimWrapper: bf16 autocast on CPU, FP16 + loss scaling on CUDA."""

import pytest
import torch
from torch import nn

from oars.engine.optim_wrapper import MixedPrecisionOptimWrapper


def _wrapper(**kwargs):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return model, MixedPrecisionOptimWrapper(optimizer=opt, **kwargs)


def test_cpu_autocasts_to_bfloat16_and_steps():
    model, wrapper = _wrapper(device="cpu")
    assert wrapper.cast_dtype == torch.bfloat16 and wrapper.loss_scaler is None
    x = torch.randn(4, 8)
    before = [p.detach().clone() for p in model.parameters()]
    with wrapper.optim_context(model):
        out = model(x)
        assert out.dtype == torch.bfloat16
        loss = out.float().pow(2).mean()
    wrapper.update_params(loss)
    after = list(model.parameters())
    assert all(not torch.equal(a, b) for a, b in zip(before, after))
    assert all(p.dtype == torch.float32 for p in after)


def test_cpu_rejects_float16():
    with pytest.raises(ValueError, match="bfloat16"):
        _wrapper(device="cpu", dtype="float16")


def test_bad_dtype_names_the_key():
    with pytest.raises(ValueError, match="optim_wrapper.dtype"):
        _wrapper(device="cpu", dtype="int8")


def test_gradient_accumulation_and_clipping_still_apply():
    model, wrapper = _wrapper(device="cpu", accumulative_counts=2, clip_grad={"max_norm": 0.01})
    x = torch.randn(4, 8)
    p0 = model[0].weight.detach().clone()
    with wrapper.optim_context(model):
        loss = model(x).float().pow(2).mean()
    wrapper.update_params(loss)
    assert torch.equal(model[0].weight, p0)  # first of two accumulated steps: no update yet
    with wrapper.optim_context(model):
        loss = model(x).float().pow(2).mean()
    wrapper.update_params(loss)
    assert not torch.equal(model[0].weight, p0)
    # clipped: the whole step is bounded by lr * max_norm
    assert (model[0].weight - p0).norm() <= 0.1 * 0.01 + 1e-6


def test_state_dict_round_trip():
    model, wrapper = _wrapper(device="cpu")
    with wrapper.optim_context(model):
        loss = model(torch.randn(2, 8)).float().sum()
    wrapper.update_params(loss)
    state = wrapper.state_dict()
    _, other = _wrapper(device="cpu")
    other.load_state_dict(state)
    assert other.param_groups[0]["lr"] == wrapper.param_groups[0]["lr"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_fp16_skips_steps_with_inf_gradients():
    torch.manual_seed(0)
    model = nn.Linear(8, 1).cuda()
    wrapper = MixedPrecisionOptimWrapper(optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    assert wrapper.cast_dtype == torch.float16 and wrapper.loss_scaler is not None
    w0 = model.weight.detach().clone()
    with wrapper.optim_context(model):
        loss = model(torch.randn(4, 8, device="cuda")).float().sum() * float("inf")
    wrapper.update_params(loss)
    assert wrapper.skipped_steps == 1
    assert torch.equal(model.weight, w0)
    with wrapper.optim_context(model):
        out = model(torch.randn(4, 8, device="cuda"))
        assert out.dtype == torch.float16
    wrapper.update_params(out.float().sum())
    assert not torch.equal(model.weight, w0)
