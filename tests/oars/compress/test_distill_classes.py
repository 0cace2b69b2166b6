"""Distillation compares the teacher's classes with the student's, names and order (oars.compress.distill_classes):
a reordered teacher is refused with both lists, the same order passes, and compress.distill.class_map permutes the
teacher's logit channels into the student's order before the loss (checked on a hand-made tensor)."""

from __future__ import annotations

import pytest
import torch
from demo_utils import DEMO_CFG
from mmengine.model import BaseModel
from torch import nn

from oars.compress.distill_classes import (
    DistillClassesWarning,
    check_class_map,
    config_classes,
    permute_classes,
    teacher_classes_of,
    teacher_order,
)
from oars.compress.distill_losses import LogitKDLoss
from oars.compress.distill_model import DistillModel
from oars.config import load_config
from oars.errors import OarsError

STUDENT = ["background", "circle", "square", "triangle"]
TEACHER = ["background", "square", "circle", "triangle"]  # circle and square swapped


class _Net(BaseModel):
    """Conv features -> 1x1 logits, one channel per class (what decode_head.conv_seg outputs)."""

    def __init__(self, width: int, classes: int = 4) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.ReLU())
        self.head = nn.Conv2d(width, classes, 1)

    def forward(self, inputs, data_samples=None, mode="tensor"):
        out = self.head(self.backbone(inputs))
        return {"loss_task": out.pow(2).mean()} if mode == "loss" else out


def _teacher_with_channel_values(values: list[float]) -> _Net:
    """A teacher whose logit channel c is ``values[c]`` at every pixel (head weights 0, bias = values)."""
    teacher = _Net(8)
    with torch.no_grad():
        teacher.head.weight.zero_()
        teacher.head.bias.copy_(torch.tensor(values))
    return teacher


_LOGITS = [{"loss": {"type": "LogitKDLoss", "temperature": 1.0}, "student_layer": "head", "teacher_layer": "head"}]


def _model(teacher: nn.Module | None = None, **kwargs) -> DistillModel:
    torch.manual_seed(0)
    return DistillModel(_Net(4), teacher or _Net(8), _LOGITS, sample_shape=[2, 3, 8, 8], **kwargs)


def test_reordered_teacher_is_refused_naming_both_lists():
    with pytest.raises(OarsError) as info:
        _model(student_classes=STUDENT, teacher_classes=TEACHER)
    message = str(info.value)
    assert str(STUDENT) in message and str(TEACHER) in message
    assert "index 1: student 'circle', teacher 'square'" in message
    assert "compress.distill.class_map=[0, 2, 1, 3]" in message  # the same names: the map that means it
    with pytest.raises(OarsError, match=r"index 3: student 'triangle', teacher \(none: the list ends\)"):
        teacher_order(STUDENT, STUDENT[:3], None)


def test_same_order_is_accepted_and_nothing_is_permuted():
    model = _model(_teacher_with_channel_values([1.0, 2.0, 3.0, 4.0]), student_classes=STUDENT,
                   teacher_classes=list(STUDENT))
    assert model.teacher_order is None and model.class_pairs == [True]
    model(torch.randn(2, 3, 8, 8), mode="loss")
    _, t = model._pair("head", "head", True)
    assert t[0, :, 0, 0].tolist() == [1.0, 2.0, 3.0, 4.0]


@pytest.mark.parametrize("class_map", [{"circle": "circle", "square": "square"}, [0, 2, 1, 3]])
def test_explicit_class_map_permutes_the_teacher_logits(class_map):
    model = _model(_teacher_with_channel_values([1.0, 2.0, 3.0, 4.0]), student_classes=STUDENT,
                   teacher_classes=TEACHER, class_map=class_map)
    assert model.teacher_order.tolist() == [0, 2, 1, 3]
    x = torch.randn(2, 3, 8, 8)
    losses = model(x, mode="loss")
    s, t = model._pair("head", "head", True)
    # teacher channels [bg=1, square=2, circle=3, triangle=4] in the student's order [bg, circle, square, triangle]
    assert t[1, :, 5, 2].tolist() == [1.0, 3.0, 2.0, 4.0]
    expected = LogitKDLoss(1.0)(s, t)
    unpermuted = LogitKDLoss(1.0)(s, model.features["teacher"]["head"])
    assert losses["distill.0.loss_LogitKDLoss"].item() == pytest.approx(expected.item(), rel=1e-6)
    assert abs(expected.item() - unpermuted.item()) > 1e-4  # the permutation changed what is taught


def test_permute_classes_by_hand():
    scores = torch.tensor([[10.0, 20.0, 30.0]])  # class scores [N, C]
    assert permute_classes(scores, torch.tensor([2, 0, 1])).tolist() == [[30.0, 10.0, 20.0]]
    dense = torch.arange(8.0).reshape(1, 2, 2, 2)  # [N, C, H, W]
    assert torch.equal(permute_classes(dense, torch.tensor([1, 0])), torch.cat([dense[:, 1:], dense[:, :1]], 1))
    assert permute_classes(dense, None) is dense


def test_unknown_side_warns_naming_it_and_keeps_the_count_check():
    with pytest.warns(DistillClassesWarning, match="the teacher's class names are unknown"):
        model = _model(student_classes=STUDENT)
    assert model.teacher_order is None
    with pytest.raises(OarsError, match="the teacher's are unknown; give a list of teacher class indices"):
        with pytest.warns(DistillClassesWarning):
            teacher_order(STUDENT, None, {"circle": "square"})


def test_bad_class_maps_are_named():
    with pytest.raises(OarsError, match="each of the teacher's 4 class indices"):
        teacher_order(STUDENT, TEACHER, [0, 1, 1, 3])
    with pytest.raises(OarsError, match=r"\['disc'\] are not student classes"):
        teacher_order(STUDENT, TEACHER, {"disc": "circle"})
    with pytest.raises(OarsError, match="not each of the teacher's classes"):
        teacher_order(STUDENT, TEACHER, {"circle": "square"})  # square would teach circle and square
    with pytest.raises(OarsError, match="compress.distill.class_map: expected a mapping"):
        check_class_map("circle")
    features = [{"loss": {"type": "FeatureImitationLoss"}, "student_layer": "backbone", "teacher_layer": "backbone"}]
    with pytest.raises(OarsError, match="class_map: given, but no distillation loss compares class logits"):
        DistillModel(_Net(4), _Net(8), features, sample_shape=[2, 3, 8, 8], student_classes=STUDENT,
                     teacher_classes=TEACHER, class_map=[0, 2, 1, 3])
    # features only: the classes never meet channel by channel, so different lists are no error
    DistillModel(_Net(4), _Net(8), features, sample_shape=[2, 3, 8, 8], student_classes=STUDENT,
                 teacher_classes=["cat", "dog", "bird", "fish"])


def test_classes_come_from_the_configs(tmp_path):
    assert config_classes(load_config(DEMO_CFG, [])) == STUDENT
    teacher_cfg = tmp_path / "teacher.yaml"
    teacher_cfg.write_text(f"_base_: {DEMO_CFG}\ntrain_dataloader:\n  dataset:\n    classes: {TEACHER}\n")
    teacher = _Net(8)
    teacher.dataset_meta = {"classes": ["class0", "class1", "class2", "class3"]}  # random_checkpoint's names
    spec = {"config": str(teacher_cfg), "checkpoint": "t.pth"}
    with pytest.warns(DistillClassesWarning, match="the config's are used"):
        classes, source = teacher_classes_of(spec, teacher)
    assert classes == TEACHER and str(teacher_cfg) in source
    assert teacher_classes_of(None, teacher)[0] == ["class0", "class1", "class2", "class3"]
