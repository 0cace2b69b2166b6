"""Knowledge distillation as one model: a frozen teacher and a student, task-neutral (``type: DistillModel``).

Each training step runs the teacher once under ``no_grad`` in its export-mode forward (``mode='tensor'``) on the
student's pre-processed batch, then the student's own ``loss``; forward hooks on the named layers
(``student_layer: backbone.layer4``, ``teacher_layer: ...``) collect the features the distillation losses
(oars.compress.distill_losses, combinable, each with its ``weight``) compare. The teacher is held outside the
module tree: not in ``parameters()`` (the optimizer never sees it), not in ``state_dict()`` (checkpoints hold the
student, the losses' adapters and nothing of the teacher), always in eval mode, moved with the student.
Prediction and export-mode forward are the student's.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import torch
from mmengine.model import BaseModel
from torch import nn

from oars.compress.distill_classes import (
    ClassMap,
    check_class_map,
    checkpoint_classes,
    class_counts,
    permute_classes,
    teacher_classes_of,
    teacher_order,
)
from oars.compress.distill_losses import DistillShapeError
from oars.errors import OarsError
from oars.registry import MODELS

_CLASS_MAP = "compress.distill.class_map"  # the option's name where users write it (DistillModel's class_map)


TeacherLoader = Callable[[str, str, Sequence[str]], nn.Module]
"""``(config, checkpoint, overrides) -> the trained teacher``: what turns ``teacher: {config, checkpoint}`` into a
model (:func:`oars.pipelines.compress.distill.load_teacher`)."""

_teacher_loader: TeacherLoader | None = None


def set_teacher_loader(loader: TeacherLoader | None) -> TeacherLoader | None:
    """Set who loads a teacher given by its config and checkpoint; returns the one set before.

    Why a slot: loading a trained model (its config, its task's scope, a checkpoint file or hub name) is the job of
    the pipelines floor, above this one; DistillModel only needs the loaded model. ``oars.pipelines.compress.distill``
    sets its ``load_teacher`` here when it is imported (``tools/compress.py --method distill`` imports it).
    """
    global _teacher_loader
    before, _teacher_loader = _teacher_loader, loader
    return before


def _load_teacher(spec: dict) -> nn.Module:
    """The teacher of ``spec`` (``{config, checkpoint, overrides}``) through the loader that is set."""
    if _teacher_loader is None:
        raise OarsError(f"model.teacher {{config: {spec['config']}, checkpoint: {spec['checkpoint']}}}: no teacher "
                        "loader is set; a DistillModel config is trained by tools/compress.py --method distill (in "
                        "Python: import oars.pipelines.compress.distill first, which loads teachers)")
    return _teacher_loader(str(spec["config"]), str(spec["checkpoint"]), list(spec.get("overrides") or ()))


def freeze(model: nn.Module) -> nn.Module:
    """``model`` in eval mode with every parameter's ``requires_grad`` off; returns it."""
    for p in model.parameters():
        p.requires_grad_(False)
    return model.eval()


@MODELS.register_module()
class DistillModel(BaseModel):
    """Student + frozen teacher + distillation losses (see the module docstring).

    Args:
        student: the student's model config (or a built model).
        teacher: ``{config: path, checkpoint: path, overrides: [..]}``, loaded through the loader that is set
            (:func:`set_teacher_loader`), or a built model.
        losses: ``[{student_layer: name, teacher_layer: name, weight: 1.0, loss: {type: LogitKDLoss |
            FeatureImitationLoss | ChannelWiseDistillLoss, ...its own arguments}}]``.
        sample_shape: ``[B, C, H, W]`` of the dry run that checks every layer pair and sizes the adapters
            (``export.input_shape``).
        student_classes: the student's class names in channel order (its config's dataset's; None: unknown, or
            a built student's ``dataset_meta``).
        teacher_classes: the teacher's (None: its config's dataset's, else its checkpoint's ``dataset_meta``).
        class_map: which teacher class teaches each student class (``oars.compress.distill_classes``): None (the
            class lists must be equal), a list of teacher indices, or ``{student class: teacher class}``. It
            applies to the layer pairs whose outputs have one channel per class (the logits), whose teacher
            channels are permuted into the student's order before the loss.
    """

    def __init__(self, student: dict | nn.Module, teacher: dict | nn.Module, losses: Sequence[dict],
                 sample_shape: Sequence[int] = (2, 3, 64, 64), student_classes: Sequence[str] | None = None,
                 teacher_classes: Sequence[str] | None = None, class_map: ClassMap = None) -> None:
        student = student if isinstance(student, nn.Module) else MODELS.build(copy.deepcopy(dict(student)))
        super().__init__(data_preprocessor=student.data_preprocessor)
        self.student = student
        teacher_spec = None if isinstance(teacher, nn.Module) else teacher  # its config names the teacher's classes
        if not isinstance(teacher, nn.Module):
            if not isinstance(teacher, dict) or not teacher.get("config") or not teacher.get("checkpoint"):
                raise OarsError(f"model.teacher must be {{config: <teacher YAML>, checkpoint: <its weights>}}, got "
                                f"{teacher!r}")
            teacher = _load_teacher(teacher)
        self._teacher = [freeze(teacher)]  # a list: outside the module tree (no parameters, no state_dict keys)
        if not losses:
            raise OarsError("model.losses: give at least one distillation loss, e.g. {student_layer: "
                            "decode_head.conv_seg, teacher_layer: decode_head.conv_seg, loss: {type: LogitKDLoss}}")
        for i, spec in enumerate(losses):
            if not isinstance(spec, dict) or not isinstance(spec.get("loss"), dict) or not spec["loss"].get("type"):
                raise OarsError(f"model.losses[{i}]: expected {{student_layer, teacher_layer, weight, loss: {{type: "
                                f"LogitKDLoss | FeatureImitationLoss | ChannelWiseDistillLoss, ...}}}}, got {spec!r}")
        self.pairs = [(self._layer(self.student, "student", spec), self._layer(teacher, "teacher", spec))
                      for spec in losses]
        self.weights = [float(spec.get("weight", 1.0)) for spec in losses]
        if student_classes is None:
            student_classes = checkpoint_classes(student)
        self._classes = {"student": (list(student_classes) if student_classes else None, "the student's config"),
                         "teacher": teacher_classes_of(teacher_spec, teacher, teacher_classes)}
        self.class_map = check_class_map(class_map, _CLASS_MAP)
        self.class_pairs = [False] * len(self.pairs)  # which pairs compare class logits (set by the dry run)
        self.register_buffer("teacher_order", None, persistent=False)
        self.features: dict[str, dict[str, torch.Tensor]] = {"student": {}, "teacher": {}}
        self._hook(self.student, "student", {s for s, _ in self.pairs})
        self._hook(teacher, "teacher", {t for _, t in self.pairs})
        self.distill_losses = nn.ModuleList(self._build_losses(losses, sample_shape))

    @property
    def teacher(self) -> nn.Module:
        """The frozen teacher (not a sub-module: see the module docstring)."""
        return self._teacher[0]

    @staticmethod
    def _layer(model: nn.Module, who: str, spec: dict) -> str:
        name = spec.get(f"{who}_layer")
        if not name:
            raise OarsError(f"model.losses: {spec['loss'].get('type')} needs {who}_layer (a module name, e.g. "
                            "decode_head.conv_seg)")
        try:
            model.get_submodule(name)
        except AttributeError:
            top = [n for n, _ in model.named_children()]
            raise OarsError(f"model.losses: {who}_layer {name!r} is not a module of the {who} "
                            f"({type(model).__name__}; its top-level modules: {top})") from None
        return name

    def _match_classes(self) -> None:
        """After the dry run: mark the pairs whose outputs have one channel per class (the logits), check the
        class lists of both sides on them and set ``teacher_order`` (see ``oars.compress.distill_classes``)."""
        (student, student_source), (teacher, teacher_source) = self._classes["student"], self._classes["teacher"]
        n_student, n_teacher = class_counts(student, teacher, self.class_map)
        for i, (s_name, t_name) in enumerate(self.pairs):
            s, t = self._pair(s_name, t_name)
            self.class_pairs[i] = n_student is not None and s.dim() >= 2 and t.dim() >= 2 and \
                s.shape[1] == n_student and t.shape[1] == n_teacher
        if not any(self.class_pairs):
            if self.class_map is not None:
                raise OarsError(f"{_CLASS_MAP}: given, but no distillation loss compares class logits: no "
                                f"student_layer/teacher_layer pair outputs one channel per class ({n_student} "
                                f"student, {n_teacher} teacher classes) on axis 1; name the layers that output the "
                                "logits (e.g. decode_head.conv_seg)")
            if student is not None or teacher is not None:
                return  # features only: the classes do not meet channel by channel
        order = teacher_order(student, teacher, self.class_map, student_source, teacher_source, _CLASS_MAP)
        self.teacher_order = None if order is None else torch.tensor(order, dtype=torch.long)

    def _hook(self, model: nn.Module, who: str, names: set[str]) -> None:
        store = self.features[who]
        for name in names:
            def keep(_module: nn.Module, _args: Any, out: Any, name: str = name) -> None:
                store[name] = out
            model.get_submodule(name).register_forward_hook(keep)

    def _build_losses(self, losses: Sequence[dict], sample_shape: Sequence[int]) -> list[nn.Module]:
        """Dry run (teacher and student, no grad) to check the pairs and give FeatureImitationLoss its widths."""
        x = torch.randn(*[max(2, int(sample_shape[0]))] + [int(v) for v in sample_shape[1:]])
        self._run_both(x, train_student=False)
        self._match_classes()
        built = []
        for spec, (s_name, t_name), logits in zip(losses, self.pairs, self.class_pairs):
            args = dict(spec["loss"])
            s, t = self._pair(s_name, t_name, logits)
            if args.get("type") == "FeatureImitationLoss" and s.dim() == 4 and t.dim() == 4:
                args.setdefault("student_channels", int(s.shape[1]))
                args.setdefault("teacher_channels", int(t.shape[1]))
            loss = MODELS.build(args)
            with torch.no_grad():
                self._apply_loss(loss, s_name, t_name, s, t)  # a mismatch fails here, before training starts
            built.append(loss)
        return built

    def _run_both(self, inputs: torch.Tensor, train_student: bool, data_samples: Any = None) -> Any:
        for store in self.features.values():
            store.clear()
        with torch.no_grad():
            self.teacher(inputs, mode="tensor")
        if train_student:
            return self.student(inputs, data_samples, mode="loss")
        with torch.no_grad():
            was = self.student.training
            self.student.eval()
            self.student(inputs, mode="tensor")
            self.student.train(was)
        return None

    def _pair(self, s_name: str, t_name: str, logits: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """The pair's collected outputs; for a pair of class logits (``logits``) the teacher's class channels
        are in the student's order (``teacher_order``)."""
        s, t = self.features["student"].get(s_name), self.features["teacher"].get(t_name)
        for who, name, value in (("student", s_name, s), ("teacher", t_name, t)):
            if not isinstance(value, torch.Tensor):
                raise OarsError(f"model.losses: {who}_layer {name!r} " + (
                    "was not run by the export-mode forward" if value is None else
                    f"returns {type(value).__name__}, not a tensor; name a module that returns one"))
        return s, (permute_classes(t, self.teacher_order) if logits else t)

    @staticmethod
    def _apply_loss(loss: nn.Module, s_name: str, t_name: str, s: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        try:
            return loss(s, t)
        except DistillShapeError as err:
            raise DistillShapeError(f"{err} (student_layer {s_name}, teacher_layer {t_name})") from None

    def forward(self, inputs: torch.Tensor, data_samples: Any = None, mode: str = "tensor") -> Any:
        """``loss``: the student's losses + ``distill.<i>.loss_<LossType>`` (mmengine sums the keys holding
        "loss"); other modes: the student's."""
        if mode != "loss":
            return self.student(inputs, data_samples, mode=mode)
        losses = dict(self._run_both(inputs, train_student=True, data_samples=data_samples))
        for i, (loss, (s_name, t_name), w, logits) in enumerate(zip(self.distill_losses, self.pairs, self.weights,
                                                                     self.class_pairs)):
            s, t = self._pair(s_name, t_name, logits)
            losses[f"distill.{i}.loss_{type(loss).__name__}"] = w * self._apply_loss(loss, s_name, t_name, s, t)
        return losses

    def train(self, mode: bool = True) -> DistillModel:
        super().train(mode)
        self.teacher.eval()  # the teacher's batch norms and dropout stay in inference mode
        return self

    def _apply(self, fn: Any, recurse: bool = True) -> DistillModel:
        super()._apply(fn, recurse)
        self.teacher._apply(fn)  # .to(device) / .cuda() move the teacher too
        return self


def student_state_dict(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The student's own state dict from a DistillModel's (``student.*`` keys, prefix removed)."""
    return {k[len("student."):]: v for k, v in state.items() if k.startswith("student.")}
