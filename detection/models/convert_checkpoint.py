"""A torchvision detection checkpoint file turned into an oars checkpoint file (``tools/convert.py torchvision2oars``).

Why a module of its own: it recognises which converter a file needs (two-stage R-CNN in
:mod:`detection.models.convert_torchvision`, RetinaNet / FCOS / SSD in
:mod:`detection.models.convert_torchvision_onestage`) and so sits above both; the one-stage converters build on
the two-stage module's helpers, and the file-level step living in that module closed an import circle.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from .convert_torchvision import ConversionError, coco_category_ids, rcnn_from_torchvision, resolve_class_ids
from .convert_torchvision_onestage import (
    dense_from_torchvision,
    dense_num_classes,
    is_torchvision_dense,
    is_torchvision_ssd,
    ssd_from_torchvision,
    ssd_num_outputs,
)


def convert_checkpoint_file(src: str, dst: str, classes: str | Sequence[int] | Sequence[str] = "coco80",
                            config: str | None = None, overrides: Sequence[str] = ()) -> str:
    """Convert a torchvision checkpoint file into an oars checkpoint (``tools/convert.py torchvision2oars``).

    Args:
        src: the torchvision ``.pth`` (loaded with ``weights_only=True``; see :func:`torchvision_state_dict`).
        dst: the output file: ``{'state_dict': ..., 'meta': {...}}``, written atomically, for ``tools/eval.py -w``
            and ``load_from``. ``meta`` records the source, ``classes``, ``num_classes`` and
            ``torchvision_labels`` (torchvision's label, i.e. the COCO category id, of each of our classes).
        classes: see :func:`rcnn_from_torchvision`; strings of digits (from a command line) are label indices.
        config: optional config file whose model the result is loaded into strictly (``num_classes`` checked),
            so that a checkpoint that does not fit fails here rather than at evaluation.
        overrides: ``-o key=value`` overrides of ``config``.

    Returns:
        a one-line summary of what was written.

    Raises:
        ConversionError: bad ``classes``, a checkpoint of another architecture, or one that does not fit the
            config's model. ``CheckpointError`` / ``DataFileNotFoundError``: an unreadable or missing ``src``.
    """
    from oars.engine.checkpoint import load_checkpoint_file
    from oars_deploy.atomic import atomic_write

    if not isinstance(classes, str):
        values = [str(c) for c in classes]
        classes = values[0] if len(values) == 1 and not values[0].isdigit() else values
    checkpoint = load_checkpoint_file(src)
    if is_torchvision_ssd(checkpoint):  # SSD / SSDLite
        state = ssd_from_torchvision(checkpoint, classes)
        num_classes = len(resolve_class_ids(classes, ssd_num_outputs(checkpoint)))
    elif is_torchvision_dense(checkpoint):  # RetinaNet / FCOS
        state = dense_from_torchvision(checkpoint, classes)
        num_classes = dense_num_classes(state)
    else:
        state = rcnn_from_torchvision(checkpoint, classes)
        num_classes = int(state["roi_head.bbox_head.fc_cls.weight"].shape[0]) - 1
    if config is not None:
        _check_fits(state, num_classes, config, overrides)
    meta: dict[str, Any] = dict(source="torchvision", converted_from=str(src), num_classes=num_classes,
                                classes=classes if isinstance(classes, str) else [int(c) for c in classes])
    # torchvision's label of each of our classes: the COCO category id for torchvision's COCO models.
    meta["torchvision_labels"] = coco_category_ids(torch.arange(num_classes), classes).tolist()
    buffer = io.BytesIO()
    torch.save({"state_dict": state, "meta": meta}, buffer)
    atomic_write(dst, buffer.getvalue())
    what = "with masks" if any(k.startswith("roi_head.mask_head.") for k in state) else "boxes only"
    what = "RetinaNet / FCOS" if "bbox_head.classification_head.cls_logits.bias" in state else what
    what = "SSD" if any(k.startswith("bbox_head.cls_convs.") for k in state) else what
    return f"wrote {dst}: {len(state)} tensors ({what}), num_classes {num_classes} (classes={meta['classes']})"


def _check_fits(state: dict[str, Tensor], num_classes: int, config: str, overrides: Sequence[str]) -> None:
    import copy

    from mmengine.registry import MODELS, DefaultScope

    from oars.config import load_config

    cfg = load_config(config, list(overrides))
    if cfg.model.get("num_classes") != num_classes:
        raise ConversionError(
            f"{config}: model.num_classes={cfg.model.get('num_classes')} but the converted checkpoint has "
            f"{num_classes} classes; pick --classes to match (coco80: 80, all: 90 for COCO) or override "
            f"-o model.num_classes={num_classes}"
        )
    with DefaultScope.overwrite_default_scope(cfg.get("default_scope", "detection")):
        model = MODELS.build(copy.deepcopy(cfg.model))
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise ConversionError(f"the converted checkpoint does not fit the model of {config}: {err}") from None
