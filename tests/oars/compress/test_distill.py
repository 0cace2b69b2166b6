"""Distillation (oars.compress.distill*): each loss on a case computed by hand, the teacher frozen and out of the
checkpoints, a shape mismatch named, and one short run_distill of the shrunk U-Net demo."""

from __future__ import annotations

import math
import os.path as osp

import pytest
import torch
from demo_utils import DEMO_CFG, demo_overrides
from mmengine.model import BaseModel
from torch import nn

from oars.compress.distill_losses import ChannelWiseDistillLoss, DistillShapeError, FeatureImitationLoss, LogitKDLoss
from oars.compress.distill_model import DistillModel
from oars.errors import OarsError


def test_logit_kd_by_hand():
    # teacher probabilities softmax([0, ln 3]) = [1/4, 3/4], student uniform [1/2, 1/2]; T = 1
    student, teacher = torch.zeros(1, 2), torch.tensor([[0.0, math.log(3.0)]])
    expected = 0.25 * math.log(0.25 / 0.5) + 0.75 * math.log(0.75 / 0.5)
    assert LogitKDLoss(temperature=1.0)(student, teacher).item() == pytest.approx(expected, rel=1e-6)
    # T = 2: teacher logits / 2 -> softmax([0, ln 3 / 2]) = [1/(1+sqrt3), sqrt3/(1+sqrt3)], times T^2 = 4
    p = 1 / (1 + math.sqrt(3.0))
    expected_t2 = 4 * (p * math.log(p / 0.5) + (1 - p) * math.log((1 - p) / 0.5))
    assert LogitKDLoss(temperature=2.0)(student, teacher).item() == pytest.approx(expected_t2, rel=1e-6)
    # dense logits [N, C, H, W]: the mean over pixels of the per-pixel KL; identical logits give 0
    dense_s = torch.zeros(1, 2, 1, 2)
    dense_t = torch.tensor([[[[0.0, 0.0]], [[math.log(3.0), 0.0]]]])
    assert LogitKDLoss(1.0)(dense_s, dense_t).item() == pytest.approx(expected / 2, rel=1e-6)
    assert LogitKDLoss(1.0)(dense_t, dense_t).item() == pytest.approx(0.0, abs=1e-7)


def test_feature_imitation_by_hand_and_adapter():
    s = torch.tensor([[[[1.0, 2.0]]]])  # [1, 1, 1, 2]
    t = torch.tensor([[[[0.0, 4.0]]]])
    assert FeatureImitationLoss()(s, t).item() == pytest.approx((1 + 4) / 2)
    loss = FeatureImitationLoss(student_channels=2, teacher_channels=3)
    assert isinstance(loss.adapter, nn.Conv2d) and loss.adapter.weight.shape == (3, 2, 1, 1)
    with torch.no_grad():
        loss.adapter.weight.zero_()
        loss.adapter.bias.copy_(torch.tensor([1.0, 2.0, 3.0]))
    # adapter output is the bias everywhere: mean((b_c - 0)^2) = (1 + 4 + 9) / 3
    assert loss(torch.randn(2, 2, 3, 3), torch.zeros(2, 3, 3, 3)).item() == pytest.approx(14 / 3)
    with pytest.raises(DistillShapeError, match=r"\[2, 2, 3, 3\].*\[2, 3, 4, 4\]"):
        loss(torch.randn(2, 2, 3, 3), torch.zeros(2, 3, 4, 4))


def test_channel_wise_distillation_by_hand():
    # one sample, 2 channels, 2 positions; T = 1. Channel 0: teacher [0, ln 3] -> [1/4, 3/4] vs student uniform;
    # channel 1: equal maps -> 0. Loss = T^2 / C * sum_c KL = (KL_0 + 0) / 2
    s = torch.tensor([[[[0.0, 0.0]], [[1.0, 2.0]]]])
    t = torch.tensor([[[[0.0, math.log(3.0)]], [[1.0, 2.0]]]])
    kl0 = 0.25 * math.log(0.5) + 0.75 * math.log(1.5)
    assert ChannelWiseDistillLoss(temperature=1.0)(s, t).item() == pytest.approx(kl0 / 2, rel=1e-6)
    # a channel's softmax is over positions, so adding a constant to a channel's map changes nothing
    assert ChannelWiseDistillLoss(1.0)(t + torch.tensor([5.0, -2.0]).reshape(1, 2, 1, 1), t).item() == \
        pytest.approx(0.0, abs=1e-6)


class _Net(BaseModel):
    """A tiny dense model: conv features -> 1x1 logits; loss mode = the mean logit squared."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU())
        self.head = nn.Conv2d(width, 2, 1)

    def forward(self, inputs, data_samples=None, mode="tensor"):
        out = self.head(self.backbone(inputs))
        return {"loss_task": out.pow(2).mean()} if mode == "loss" else out


def _distiller(student_width: int = 4, teacher_width: int = 8, **loss) -> DistillModel:
    torch.manual_seed(0)
    losses = [{"loss": {"type": "LogitKDLoss", "temperature": 2.0}, "student_layer": "head", "teacher_layer": "head"},
              {"loss": {"type": "FeatureImitationLoss"}, "student_layer": "backbone", "teacher_layer": "backbone",
               "weight": 0.5},
              {"loss": {"type": "ChannelWiseDistillLoss", **loss}, "student_layer": "head", "teacher_layer": "head"}]
    return DistillModel(_Net(student_width), _Net(teacher_width), losses, sample_shape=[2, 3, 8, 8])


def test_teacher_frozen_and_out_of_the_state_dict():
    model = _distiller()
    teacher_before = {k: v.clone() for k, v in model.teacher.state_dict().items()}
    assert not any(k.startswith("teacher") or "._teacher" in k for k in model.state_dict())
    assert all(not p.requires_grad for p in model.teacher.parameters())
    ids = {id(p) for p in model.parameters()}
    assert not ids & {id(p) for p in model.teacher.parameters()}
    assert "distill_losses.1.adapter.weight" in model.state_dict()  # 4 -> 8 channels: a learned adapter
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model.train()
    assert not model.teacher.training
    for _ in range(2):
        losses = model(torch.randn(2, 3, 8, 8), mode="loss")
        assert set(losses) == {"loss_task", "distill.0.loss_LogitKDLoss", "distill.1.loss_FeatureImitationLoss",
                               "distill.2.loss_ChannelWiseDistillLoss"}
        total, log_vars = model.parse_losses(losses)  # what the runner's train_step sums
        assert "distill.2.loss_ChannelWiseDistillLoss" in log_vars
        assert total.item() == pytest.approx(sum(v.item() for v in losses.values()), rel=1e-5)
        total.backward()
        opt.step()
        opt.zero_grad()
    for k, v in model.teacher.state_dict().items():  # BN running stats included: the teacher ran in eval mode
        assert torch.equal(v, teacher_before[k]), k
    assert model(torch.randn(1, 3, 8, 8)).shape == (1, 2, 8, 8)  # tensor mode: the student's


def test_teacher_output_mismatch_names_both_shapes():
    losses = [{"loss": {"type": "LogitKDLoss"}, "student_layer": "head", "teacher_layer": "backbone"}]
    with pytest.raises(DistillShapeError, match=r"\[2, 2, 8, 8\].*\[2, 8, 8, 8\].*student_layer head"):
        DistillModel(_Net(4), _Net(8), losses, sample_shape=[2, 3, 8, 8])
    with pytest.raises(OarsError, match="teacher_layer 'neck' is not a module"):
        DistillModel(_Net(4), _Net(8), [{"loss": {"type": "LogitKDLoss"}, "student_layer": "head",
                                         "teacher_layer": "neck"}])


def test_run_distill_short(demo_data, tmp_path):
    """Teacher: the demo U-Net (16 channels, untrained weights saved); student: 4 channels; 2 iterations."""
    from mmengine.registry import MODELS, DefaultScope

    from oars.config import load_config
    from oars.pipelines.compress.distill import run_distill
    from oars.tasks import activate

    teacher_over = demo_overrides(demo_data, **{"model.backbone.base_channels": 8, "model.decode_head.channels": 8})
    teacher_cfg = load_config(DEMO_CFG, teacher_over)
    activate(teacher_cfg.default_scope)
    with DefaultScope.overwrite_default_scope(teacher_cfg.default_scope):
        teacher = MODELS.build(teacher_cfg.model)
    teacher_ckpt = str(tmp_path / "teacher.pth")
    torch.save({"state_dict": teacher.state_dict(), "meta": {}}, teacher_ckpt)
    cfg = load_config(DEMO_CFG, demo_overrides(demo_data))
    losses = [{"loss": {"type": "LogitKDLoss", "temperature": 2.0}, "student_layer": "decode_head.conv_seg",
               "teacher_layer": "decode_head.conv_seg"},
              {"loss": {"type": "ChannelWiseDistillLoss"}, "student_layer": "decode_head.conv_seg",
               "teacher_layer": "decode_head.conv_seg"},
              {"loss": {"type": "FeatureImitationLoss"}, "student_layer": "backbone.decoder.2",
               "teacher_layer": "backbone.decoder.2"}]
    record = run_distill(cfg, None, tmp_path / "distill", {
        "teacher_config": DEMO_CFG, "teacher_weights": teacher_ckpt, "teacher_overrides": teacher_over,
        "losses": losses, "iters": 2})
    assert record["variant"] == "distill" and osp.isfile(record["checkpoint"]) and osp.isfile(record["export"])
    state = torch.load(record["checkpoint"], map_location="cpu", weights_only=False)["state_dict"]
    assert "backbone.encoder.0.0.0.weight" in state
    assert not any(k.startswith(("teacher", "student.", "distill_losses")) for k in state)
    assert any("distill.2.loss_FeatureImitationLoss" in k for k in record["losses"]), record["losses"]
    assert record["row"]["method"] == "distill" and record["row"]["params"] > 0
