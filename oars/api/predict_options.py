"""``Model.predict``'s knobs in ultralytics' names (``conf``, ``iou``, ``max_det``, ``imgsz``, ``classes``) as the
config's test-time keys, or, for an export folder, its deploy.yaml ``postprocess`` keys.

Why found by key rather than listed per model family: the families spell their test-time settings in different
places (a one-stage head's ``model.test_cfg.score_thr``, a two-stage detector's ``model.test_cfg.rcnn.score_thr``),
but each keeps the score threshold, the NMS IoU and the per-image cap side by side. So the rule is one: every
mapping under ``model.test_cfg`` that holds ``score_thr`` is a final stage, and ``conf`` sets its ``score_thr``,
``iou`` its ``nms.iou_threshold`` (or ``iou_threshold``), ``max_det`` its ``max_per_img``. A model without such a
key gets one message naming the argument.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from oars.errors import OarsError

SCORE_KEY = "score_thr"
IOU_KEYS = (("nms", "iou_threshold"), ("iou_threshold",), ("iou_thr",))
MAX_KEY = "max_per_img"
# an export's deploy.yaml postprocess keys (the runtime's multi-class NMS reads them)
EXPORT_KEYS = {"conf": "score_thr", "iou": "iou_threshold", "max_det": "max_per_img"}


def _stages(node: Any, path: str) -> list[tuple[str, Mapping]]:
    """``(dotted path, mapping)`` of every mapping at or below ``node`` that holds :data:`SCORE_KEY`."""
    if not isinstance(node, Mapping):
        return []
    found = [(path, node)] if SCORE_KEY in node else []
    for key, value in node.items():
        found.extend(_stages(value, f"{path}.{key}"))
    return found


def _value(value: Any) -> str:
    return json.dumps(value)


def knob_overrides(cfg: Any, conf: float | None = None, iou: float | None = None, max_det: int | None = None,
                        imgsz: int | Sequence[int] | None = None) -> list[str]:
    """``-o`` overrides that set the knobs given (None: left as the config has them).

    Args:
        cfg: the loaded config. conf: keep predictions scoring at least this. iou: the NMS IoU threshold.
        max_det: at most this many predictions per image. imgsz: the test pipeline's resize scale (one size: a
            square, or ``[w, h]`` as the config's ``scale``).

    Returns:
        ``['model.test_cfg.score_thr=0.5', ...]``.

    Raises:
        OarsError: a knob out of range, or one the model has no key for (naming the argument and the keys looked
            for).
    """
    out: list[str] = []
    check_ranges(conf, iou, max_det)
    stages = _stages((cfg.get("model") or {}).get("test_cfg"), "model.test_cfg")
    where = cfg.filename
    for arg, value in (("conf", conf), ("iou", iou), ("max_det", max_det)):
        if value is None:
            continue
        if not stages:
            raise OarsError(f"Model.predict({arg}={value}): {where} has no test-time {SCORE_KEY} under "
                            f"model.test_cfg, so {arg} does not apply to this model (it applies to detectors)")
        for path, stage in stages:
            out.append(f"{path}.{_stage_key(arg, stage, path, value)}={_value(value)}")
    if imgsz is not None:  # the test pipeline's resize (the loader the test pipeline is taken from)
        from oars.api.train_options import resize_overrides

        loader = "test_dataloader" if cfg.get("test_dataloader") else "val_dataloader"
        out.extend(resize_overrides(cfg, imgsz, "Model.predict", loaders=(loader,)))
    return out


def check_ranges(conf: float | None, iou: float | None, max_det: int | None) -> None:
    """``conf`` and ``iou`` in [0, 1], ``max_det`` a positive int.

    Raises:
        OarsError: naming the argument and its value.
    """
    for arg, value in (("conf", conf), ("iou", iou)):
        if value is not None and not (isinstance(value, (int, float)) and 0.0 <= value <= 1.0):
            raise OarsError(f"Model.predict({arg}={value!r}): expected a number from 0 to 1")
    if max_det is not None and not (isinstance(max_det, int) and max_det >= 1):
        raise OarsError(f"Model.predict(max_det={max_det!r}): expected a whole number of 1 or more")


def _stage_key(arg: str, stage: Mapping, path: str, value: Any) -> str:
    """The key (relative to ``stage``) that ``arg`` sets."""
    if arg == "conf":
        return SCORE_KEY
    if arg == "max_det":
        if MAX_KEY not in stage:
            raise OarsError(f"Model.predict(max_det={value}): {path} has no {MAX_KEY}, so max_det does not apply")
        return MAX_KEY
    for keys in IOU_KEYS:
        node: Any = stage
        for key in keys:
            node = node.get(key) if isinstance(node, Mapping) else None
        if node is not None:
            return ".".join(keys)
    raise OarsError(f"Model.predict(iou={value}): {path} has no NMS IoU threshold (nms.iou_threshold), so iou does "
                    "not apply to this model")


def export_postprocess(post: dict, conf: float | None, iou: float | None, max_det: int | None,
                       export_dir: str) -> dict:
    """An export's deploy.yaml ``postprocess`` with the knobs given set (a copy).

    Raises:
        OarsError: the export's post-processing has no such key (e.g. a segmentation export, or NMS inside the
            graph), naming the argument.
    """
    check_ranges(conf, iou, max_det)
    out = dict(post)
    given = [arg for arg, value in (("conf", conf), ("iou", iou), ("max_det", max_det)) if value is not None]
    if given and "nms" in (post.get("inside_graph") or []):
        raise OarsError(f"Model.predict({', '.join(given)}): the export {export_dir} runs NMS inside its graph "
                        "(deploy.yaml postprocess.inside_graph), so these were fixed when it was exported; export "
                        "again with other test_cfg values, or filter r.boxes")
    for arg, value in (("conf", conf), ("iou", iou), ("max_det", max_det)):
        if value is None:
            continue
        key = EXPORT_KEYS[arg]
        if key not in post and not (arg == "max_det" and SCORE_KEY in post):
            raise OarsError(f"Model.predict({arg}={value}): the export {export_dir} has no postprocess.{key} in "
                            f"deploy.yaml, so {arg} does not apply to it")
        out[key] = value
    return out
