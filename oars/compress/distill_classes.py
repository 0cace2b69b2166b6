"""Which teacher class channel teaches which student class channel in distillation.

Why: distillation losses on logits compare channel c of the student with channel c of the teacher. A teacher whose
classes are the student's in another order (``[background, square, circle, triangle]`` against ``[background,
circle, square, triangle]``) has the same number of channels, so nothing failed and the student's "circle" learnt
from the teacher's "square". Here the two class lists are compared by name and order; a difference is one error
listing both, unless ``compress.distill.class_map`` says which teacher class teaches each student class, and then
the teacher's class channels are permuted into the student's order before the loss (:func:`permute_classes`).

Where the classes come from: a config's dataset (``classes`` / ``metainfo.classes`` of its train, then val, then
test dataset, else what the dataset class itself names), and for the teacher, when its config names none, its
checkpoint's ``meta.dataset_meta.classes``. A side whose classes cannot be known is a warning naming it; the
channels are then matched by index and only their count is checked (by the loss's shape check).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from mmengine.registry import DATASETS, DefaultScope

from oars.config import load_config
from oars.errors import OarsError
from oars.tasks import activate

ClassMap = list[int] | dict[str, str] | None
_SPLITS = ("train_dataloader", "val_dataloader", "test_dataloader")


class DistillClassesWarning(UserWarning):
    """A side of a distillation whose class names are unknown: its logits are matched to the other's by index."""


def config_classes(cfg: Any) -> list[str] | None:
    """The class names of a config's dataset (train, else val, else test), or None when none can be read.

    Args:
        cfg: a loaded config (mmengine ``Config`` or a mapping).

    Returns:
        The names in channel order, or None (no dataset, a classes file that is not there, a dataset class that
        names none).
    """
    for split in _SPLITS:
        loader = cfg.get(split) if hasattr(cfg, "get") else None
        dataset = (loader or {}).get("dataset") if isinstance(loader, Mapping) else None
        while isinstance(dataset, Mapping) and isinstance(dataset.get("dataset"), Mapping):
            dataset = dataset["dataset"]  # a wrapper (repeat, multi-image mix): the dataset it wraps names them
        if not isinstance(dataset, Mapping):
            continue
        written = dataset.get("classes") or (dataset.get("metainfo") or {}).get("classes")
        if isinstance(written, (list, tuple)) and written:
            return [str(c) for c in written]
        built = _built_classes(cfg, dataset)
        if built:
            return built
    return None


def _built_classes(cfg: Any, dataset: Mapping) -> list[str] | None:
    """The classes the dataset class resolves itself (a classes file, its ``METAINFO``), built lazily (no
    annotations read); None when it cannot be built here (its data is on another machine)."""
    ds_cfg = copy.deepcopy(dict(dataset))
    ds_cfg["lazy_init"] = True
    scope = cfg.get("default_scope")
    try:
        activate(scope)
        with DefaultScope.overwrite_default_scope(scope):
            classes = DATASETS.build(ds_cfg).metainfo.get("classes")
    except Exception:  # noqa: BLE001 - unknown classes are reported by the caller, as unknown
        return None
    return [str(c) for c in classes] if classes else None


def checkpoint_classes(model: torch.nn.Module) -> list[str] | None:
    """The classes a loaded model's checkpoint recorded (``meta.dataset_meta.classes``, kept by
    ``oars.pipelines.model.init_model`` as ``model.dataset_meta``), or None."""
    classes = (getattr(model, "dataset_meta", None) or {}).get("classes")
    return [str(c) for c in classes] if classes else None


def teacher_classes_of(spec: Mapping | None, teacher: torch.nn.Module,
                       given: Sequence[str] | None = None) -> tuple[list[str] | None, str]:
    """The teacher's class names and where they were read: ``given``, else its config's dataset, else its
    checkpoint's ``meta.dataset_meta`` (a config that disagrees with its checkpoint is warned about; the config
    wins, as it is what the user wrote).

    Args:
        spec: DistillModel's ``teacher`` section (``{config, checkpoint, overrides}``), or None for a built teacher.
        teacher: the loaded teacher (its ``dataset_meta`` holds the checkpoint's).
        given: names given directly (``teacher_classes``), which win.

    Returns:
        ``(names or None, where they were read)``.
    """
    if given:
        return list(given), "given as teacher_classes"
    from_ckpt = checkpoint_classes(teacher)
    if spec is None:
        return from_ckpt, "the teacher's checkpoint (meta.dataset_meta)"
    config = str(spec["config"])
    from_cfg = config_classes(load_config(config, list(spec.get("overrides") or ())))
    if from_cfg and from_ckpt and from_cfg != from_ckpt:
        warnings.warn(f"distillation: the teacher's config {config} names the classes {from_cfg} but its "
                      f"checkpoint {spec.get('checkpoint')} was trained on {from_ckpt}; the config's are used",
                      DistillClassesWarning, stacklevel=3)
    if from_cfg:
        return from_cfg, f"the teacher's config {config}"
    if from_ckpt:
        return from_ckpt, f"the teacher's checkpoint {spec.get('checkpoint')} (meta.dataset_meta)"
    return None, f"neither the teacher's config {config} nor its checkpoint's meta.dataset_meta"


def check_class_map(value: Any, where: str = "compress.distill.class_map") -> ClassMap:
    """``class_map`` in one of its two forms, checked: None, a list of teacher channel indices (entry i: the
    teacher channel that teaches student channel i) or a mapping ``{student class: teacher class}``.

    Raises:
        OarsError: another kind of value, naming ``where`` and the two forms.
    """
    if value is None:
        return None
    if isinstance(value, Mapping) and value and all(isinstance(k, str) and isinstance(v, str)
                                                     for k, v in value.items()):
        return {str(k): str(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and value and all(isinstance(i, int) and not isinstance(i, bool)
                                                          for i in value):
        return [int(i) for i in value]
    raise OarsError(f"{where}: expected a mapping {{student class: teacher class}} (e.g. {{circle: circle, square: "
                    f"square}}) or a list of teacher class indices, one per student class (e.g. [0, 2, 1, 3]); "
                    f"got {value!r}")


def teacher_order(student: Sequence[str] | None, teacher: Sequence[str] | None, class_map: ClassMap,
                  student_source: str = "the student's config", teacher_source: str = "the teacher's config",
                  where: str = "compress.distill.class_map") -> list[int] | None:
    """The teacher channel for each student channel, or None when they correspond index by index.

    Args:
        student: the student's class names in channel order (None: unknown).
        teacher: the teacher's (None: unknown).
        class_map: see :func:`check_class_map` (None: the lists must be equal, names and order).
        student_source: where ``student`` was read, for messages.
        teacher_source: where ``teacher`` was read.
        where: the option's name, for messages.

    Returns:
        ``order`` with ``teacher_logits[:, order]`` in the student's class order; None for the identity.

    Raises:
        OarsError: the lists differ without a ``class_map`` (both lists and the first differing index named), or
            a ``class_map`` that is not a one-to-one map between the classes.

    Warns:
        DistillClassesWarning: a side's classes are unknown (the side named); channels are matched by index.
    """
    class_map = check_class_map(class_map, where)
    for who, names, source in (("student", student, student_source), ("teacher", teacher, teacher_source)):
        if names is None:
            warnings.warn(f"distillation: the {who}'s class names are unknown ({source} names none): its class "
                          "channels are matched to the other side's by index, only their number is checked",
                          DistillClassesWarning, stacklevel=2)
    if class_map is None:
        if student is None or teacher is None or list(student) == list(teacher):
            return None
        raise OarsError(_mismatch(list(student), list(teacher), student_source, teacher_source, where))
    if isinstance(class_map, dict):
        if student is None or teacher is None:
            unknown = "student" if student is None else "teacher"
            raise OarsError(f"{where}: a mapping by class names needs both sides' names, and the {unknown}'s are "
                            "unknown; give a list of teacher class indices instead (e.g. [0, 2, 1, 3])")
        order = _order_from_names(list(student), list(teacher), class_map, where)
    else:
        order = class_map
        n_teacher = len(teacher) if teacher is not None else len(order)
        n_student = len(student) if student is not None else len(order)
        if len(order) != n_student or sorted(order) != list(range(n_teacher)):
            raise OarsError(f"{where}: {order} must list each of the teacher's {n_teacher} class indices "
                            f"(0..{n_teacher - 1}) once, one per student class ({n_student})")
    return None if order == list(range(len(order))) else order


def _order_from_names(student: list[str], teacher: list[str], class_map: dict[str, str], where: str) -> list[int]:
    """Teacher indices for ``{student class: teacher class}``; a student class it does not list is taught by the
    teacher class of the same name."""
    unknown = sorted(set(class_map) - set(student))
    if unknown:
        raise OarsError(f"{where}: {unknown} are not student classes; the student's classes are {student}")
    order: list[int] = []
    for name in student:
        target = class_map.get(name, name)
        if target not in teacher:
            listed = f"{where}[{name!r}] is {target!r}" if name in class_map else \
                f"student class {name!r} is not in {where} and the teacher has no class of that name"
            raise OarsError(f"{listed}; the teacher's classes are {teacher}")
        order.append(teacher.index(target))
    if len(student) != len(teacher) or len(set(order)) != len(order):
        taken = [teacher[i] for i in order]
        raise OarsError(f"{where}: the student's classes {student} are taught by {taken}, which is not each of the "
                        f"teacher's classes {teacher} once")
    return order


def _mismatch(student: list[str], teacher: list[str], student_source: str, teacher_source: str, where: str) -> str:
    first = next((i for i, (s, t) in enumerate(zip(student, teacher)) if s != t), min(len(student), len(teacher)))
    at = f"index {first}: student {_at(student, first)}, teacher {_at(teacher, first)}"
    text = (f"distillation: the teacher's classes differ from the student's, and their logits are matched channel "
            f"by channel: student {student} ({student_source}), teacher {teacher} ({teacher_source}); first "
            f"difference at {at}.")
    if sorted(student) == sorted(teacher):
        order = [teacher.index(name) for name in student]
        return f"{text} If the same classes are meant, give {where}={order} (or a mapping {{student: teacher}})"
    return f"{text} Give {where} (a list of teacher indices or {{student class: teacher class}}) if they correspond"


def _at(names: list[str], i: int) -> str:
    return repr(names[i]) if i < len(names) else "(none: the list ends)"


def permute_classes(logits: torch.Tensor, order: torch.Tensor | None) -> torch.Tensor:
    """``logits`` ``[N, C, *]`` (segmentation ``[N, C, H, W]``, class scores ``[N, C]``) with its class axis 1
    reordered: output channel i is input channel ``order[i]``; unchanged when ``order`` is None."""
    if order is None:
        return logits
    return logits.index_select(1, order.to(logits.device))


def class_counts(student: Sequence[str] | None, teacher: Sequence[str] | None,
                 class_map: ClassMap) -> tuple[int | None, int | None]:
    """How many class channels each side has, as far as known (a side's own list, else the other side's, else a
    list ``class_map``'s length): the pairs whose outputs have exactly that many channels are the class logits."""
    n_student = len(student) if student is not None else None
    n_teacher = len(teacher) if teacher is not None else None
    fallback = len(class_map) if isinstance(class_map, list) else None
    return (n_student if n_student is not None else (n_teacher if n_teacher is not None else fallback),
            n_teacher if n_teacher is not None else (n_student if n_student is not None else fallback))

