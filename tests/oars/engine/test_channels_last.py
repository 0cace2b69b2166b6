"""Channels-last training (oars.engine.memory_format): the 4-D weights change layout in place and nothing else, the
same training as the contiguous one up to rounding, the key and --channels-last resolved and recorded, a bad value
refused with one message."""

from __future__ import annotations

import copy
import logging
from types import SimpleNamespace

import pytest
import torch
import yaml
from demo_utils import DEMO_CFG, demo_overrides
from mmengine.config import Config
from torch import nn

from oars.engine.entry import print_config, train
from oars.engine.memory_format import (
    apply_channels_last,
    channels_last_blockers,
    channels_last_value,
    to_channels_last,
)
from oars.engine.run_errors import interrupted_message
from oars.engine.runner import OarsRunner
from oars.errors import OarsError

CL = torch.channels_last


def _model() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 4, 1, bias=False),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2))


def test_only_4d_tensors_change_layout_and_the_parameters_stay_the_same_objects():
    torch.manual_seed(0)
    model = _model()
    model.add_module("conv3d", nn.Conv3d(2, 2, 3))  # 5-D: Module.to(memory_format=channels_last) refuses a model
    params = list(model.parameters())
    before = {name: t.clone() for name, t in model.state_dict().items()}
    assert to_channels_last(model) == 2  # the two 2-D convolutions' weights
    assert all(a is b for a, b in zip(params, model.parameters()))  # an optimizer built before keeps working
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, before[name])  # the values are the same; only the strides changed
        assert tensor.is_contiguous(memory_format=CL) if tensor.dim() == 4 else tensor.is_contiguous()
    assert not model[0].weight.is_contiguous()  # 3 x 3: NHWC strides differ from NCHW's (a 1 x 1 weight is both)
    assert to_channels_last(model) == 2  # twice is harmless


def test_a_channels_last_step_matches_the_contiguous_one():
    torch.manual_seed(0)
    plain = _model()
    fast = copy.deepcopy(plain)
    to_channels_last(fast)
    x, y = torch.randn(4, 3, 12, 12), torch.randn(4, 2)
    for model in (plain, fast):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        for _ in range(3):
            optimizer.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
    assert fast[0].weight.grad.is_contiguous(memory_format=CL)  # autograd keeps the gradient in the weight's layout
    assert fast[0].weight.is_contiguous(memory_format=CL)  # and the optimizer the weight's
    for a, b in zip(plain.parameters(), fast.parameters()):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)  # oneDNN's channels-last kernels: rounding only


@pytest.mark.parametrize("value, expected", [(None, False), (False, False), (True, True)])
def test_channels_last_values(value, expected):
    assert channels_last_value(value) is expected


@pytest.mark.parametrize("value", ["yes", 1, {"enabled": True}])
def test_a_bad_value_gives_one_message(value):
    with pytest.raises(OarsError, match=r"^cfg.yaml: channels_last: expected true or false, got "):
        channels_last_value(value, "cfg.yaml")


def test_flag_and_key_are_resolved_and_recorded(tmp_path):
    data = yaml.safe_load(print_config(DEMO_CFG, work_dir=str(tmp_path), channels_last=True))
    assert data["channels_last"] is True
    assert data["_resolved_by_oars"]["channels_last"]["source"] == "--channels-last flag"
    data = yaml.safe_load(print_config(DEMO_CFG, ["channels_last=true"], work_dir=str(tmp_path), channels_last=True))
    assert data["channels_last"] is True  # already on: the flag changes nothing
    data = yaml.safe_load(print_config(DEMO_CFG, work_dir=str(tmp_path)))
    assert "channels_last" not in data
    with pytest.raises(OarsError, match=r"channels_last: expected true or false, got 'maybe'"):
        print_config(DEMO_CFG, ["channels_last=maybe"], work_dir=str(tmp_path))
    assert not (tmp_path / "x").exists()


def test_the_resume_command_after_ctrl_c_keeps_the_flag():
    text = interrupted_message("w", "w/iter_2.pth", "c.yaml", [], channels_last=True)
    assert text.endswith("--resume --channels-last")


def test_a_channels_last_run_trains_as_the_contiguous_one_and_its_checkpoint_loads_anywhere(demo_data, tmp_path):
    """The shrunk demo U-Net, one epoch each way from the same seed: the same losses up to rounding, the log says
    what was converted, and the checkpoint (channels-last tensors) evaluates in a contiguous model."""
    # no dropout: a random mask is drawn in memory order, so a channels-last tensor gets another (equally random)
    # mask than a contiguous one and the two runs would differ by more than rounding
    opts = demo_overrides(demo_data, epochs=1, **{"train_cfg.val_interval": 5, "randomness.seed": 3,
                                                  "model.decode_head.dropout_ratio": 0})
    plain = train(DEMO_CFG, opts, work_dir=str(tmp_path / "plain"))
    fast = train(DEMO_CFG, opts, work_dir=str(tmp_path / "fast"), channels_last=True)
    losses = [r.message_hub.get_scalar("train/loss").data[0] for r in (plain, fast)]
    assert len(losses[1]) == len(losses[0]) > 1
    assert losses[1][0] == pytest.approx(losses[0][0], rel=1e-5)  # the same weights: rounding only
    # after a few AdamW steps the rounding has grown (Adam divides by the gradients' running scale): measured 1.4e-3
    assert list(losses[1]) == pytest.approx(list(losses[0]), rel=1e-2)
    weights = [w for w in (*fast.model.parameters(), *fast.model.buffers()) if w.dim() == 4]  # buffers: also
    assert weights and all(w.is_contiguous(memory_format=CL) for w in weights)  # ones the checkpoint does not keep
    log = next((tmp_path / "fast").rglob("*.log")).read_text()
    assert f"channels_last: {len(weights)} 4-D weights and buffers stored channels-last (NHWC)" in log
    checkpoint = torch.load(tmp_path / "fast" / "epoch_1.pth", map_location="cpu", weights_only=False)
    model = copy.deepcopy(plain.model)  # contiguous, as evaluation, export and the predictors build it
    model.load_state_dict(checkpoint["state_dict"])
    for name, tensor in model.state_dict().items():
        assert tensor.is_contiguous() and torch.equal(tensor, checkpoint["state_dict"][name])


def test_narrow_strided_1x1_convolutions_are_named_and_the_runner_keeps_such_a_model_contiguous(caplog):
    """oneDNN issue #6035: the weight gradient of a strided 1x1 convolution with < 16 input channels per group on a
    channels-last input is written out of bounds on the CPU (measured: heap corruption). Such a model trains
    contiguous, with a warning naming the layer."""
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Conv2d(8, 16, 1, stride=2), nn.Conv2d(16, 16, 1, stride=2),
                          nn.Conv2d(16, 16, 1, stride=1), nn.Conv2d(16, 16, 1, stride=2, groups=2))
    assert channels_last_blockers(model) == ["1 (1x1, stride (2, 2), 8 input channels per group)",
                                             "4 (1x1, stride (2, 2), 8 input channels per group)"]
    model[1].weight.requires_grad_(False)  # frozen: no weight gradient to get wrong
    assert channels_last_blockers(model) == ["4 (1x1, stride (2, 2), 8 input channels per group)"]
    assert channels_last_blockers(nn.Conv2d(8, 8, 1, stride=2, device="meta")) == []  # not on the CPU
    assert apply_channels_last(model) == (0, channels_last_blockers(model))  # blocked: nothing converted
    assert all(p.is_contiguous() for p in model.parameters())
    assert apply_channels_last(_model()) == (2, [])

    logger = logging.getLogger("test_channels_last")
    runner = SimpleNamespace(cfg=Config({"channels_last": True}), model=model, logger=logger)
    with caplog.at_level(logging.WARNING, logger="test_channels_last"):
        OarsRunner._apply_memory_format(runner, model)
    assert all(p.is_contiguous() for p in model.parameters())
    assert caplog.messages == ["channels_last: not applied, training stays contiguous: 4 (1x1, stride (2, 2), 8 input "
                               "channels per group) would get wrong weight gradients on a channels-last input on the "
                               "CPU (oneDNN issue #6035: a strided 1x1 convolution with fewer than 16 input channels "
                               "per group)"]
