"""DistillModel (a primitive of oars.compress) loads a teacher given as ``{config, checkpoint}`` through the loader
the pipelines floor sets (oars.pipelines.compress.distill.load_teacher), never by importing the pipelines itself;
without one it says what to do instead of failing deep inside."""

from __future__ import annotations

import pytest
import torch
from mmengine.model import BaseModel
from torch import nn

from oars.compress import distill_model
from oars.compress.distill_model import DistillModel, set_teacher_loader
from oars.errors import OarsError

LOSSES = [{"loss": {"type": "LogitKDLoss"}, "student_layer": "head", "teacher_layer": "head"}]


class _Net(BaseModel):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.backbone = nn.Conv2d(3, width, 3, padding=1)
        self.head = nn.Conv2d(width, 2, 1)

    def forward(self, inputs, data_samples=None, mode="tensor"):
        out = self.head(self.backbone(inputs))
        return {"loss_task": out.pow(2).mean()} if mode == "loss" else out


@pytest.fixture
def teacher_config(tmp_path):
    path = tmp_path / "teacher.yaml"
    path.write_text("model:\n  type: Whatever\n", encoding="utf-8")
    return str(path)


def test_without_a_loader_a_config_teacher_is_one_message(monkeypatch, teacher_config):
    monkeypatch.setattr(distill_model, "_teacher_loader", None)
    with pytest.raises(OarsError) as err:
        DistillModel(_Net(4), {"config": teacher_config, "checkpoint": "t.pth"}, LOSSES, sample_shape=[2, 3, 8, 8])
    assert str(err.value) == (
        f"model.teacher {{config: {teacher_config}, checkpoint: t.pth}}: no teacher loader is set; a DistillModel "
        "config is trained by tools/compress.py --method distill (in Python: import oars.pipelines.compress.distill "
        "first, which loads teachers)")


def test_the_loader_that_is_set_loads_the_teacher_and_the_teacher_is_frozen(monkeypatch, teacher_config):
    monkeypatch.setattr(distill_model, "_teacher_loader", None)
    calls = []

    def loader(config, checkpoint, overrides):
        calls.append((config, checkpoint, overrides))
        return _Net(8)

    assert set_teacher_loader(loader) is None  # returns the one set before
    spec = {"config": teacher_config, "checkpoint": "t.pth", "overrides": ["a=1"]}
    with pytest.warns(UserWarning, match="class names are unknown"):
        model = DistillModel(_Net(4), spec, LOSSES, sample_shape=[2, 3, 8, 8])
    assert calls == [(teacher_config, "t.pth", ["a=1"])]
    assert not model.teacher.training and not any(p.requires_grad for p in model.teacher.parameters())
    assert not any(k.startswith("teacher") for k in model.state_dict())
    assert model(torch.zeros(2, 3, 8, 8), mode="tensor").shape == (2, 2, 8, 8)


def test_the_compression_pipeline_sets_its_loader():
    from oars.pipelines.compress.distill import load_teacher

    assert distill_model._teacher_loader is load_teacher
