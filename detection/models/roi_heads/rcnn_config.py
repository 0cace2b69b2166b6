"""The RoI heads' ``train_cfg`` / ``test_cfg`` (MMDetection's ``train_cfg.rcnn`` / ``test_cfg.rcnn``): which keys
are required and what they may hold. The values live in the base model YAML files
(``configs/_base_/models/*rcnn*.yaml``), not here, so that a config (and its printed, resolved form) shows what
runs; a missing key is one message naming it.
"""

from __future__ import annotations

from typing import Any

from ..heads.dense_utils import check_nms_cfg

TEST_KEYS = ("score_thr", "nms", "max_per_img", "nms_pre")  # required
TEST_OPTIONAL = ("min_bbox_size", "mask_thr_binary")  # min_bbox_size absent/None: off; mask_thr_binary: masks only
TRAIN_KEYS = ("assigner", "sampler", "pos_weight")  # required
TRAIN_OPTIONAL = ("mask_size",)  # required with a mask head


def _keys(owner: str, what: str, cfg: Any, required: tuple[str, ...], optional: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(cfg, dict):
        raise ValueError(f"{owner}: {what} must be a dict with the keys {list(required)} (the base model YAML states "
                         f"them, e.g. configs/_base_/models/faster_rcnn_r50_fpn.yaml), got {cfg!r}")
    unknown = sorted(set(cfg) - set(required) - set(optional))
    missing = [k for k in required if k not in cfg]
    if unknown or missing:
        raise ValueError(f"{owner}: {what} has unknown keys {unknown} and lacks {missing}; required: {list(required)}, "
                         f"optional: {list(optional)}")
    return dict(cfg)


def check_test_cfg(owner: str, test_cfg: dict[str, Any] | None, with_mask: bool) -> dict[str, Any]:
    """``test_cfg`` (mmdet's ``test_cfg.rcnn``) validated.

    Keys: ``score_thr`` (pairs need a score above it), ``nms`` (``{iou_threshold}``, or soft-NMS:
    :func:`detection.models.heads.dense_utils.check_nms_cfg`), ``max_per_img`` (<= 0: all),
    ``nms_pre`` (at most this many (RoI, class) pairs enter NMS; <= 0 or None: all), optionally ``min_bbox_size``
    (detections narrower or lower than it are dropped before NMS; absent or None: 0, off) and, with a mask head,
    ``mask_thr_binary`` (required then).

    Returns:
        the config with ``min_bbox_size`` a float and ``mask_thr_binary`` None without a mask head.

    Raises:
        ValueError: a missing or unknown key, or a value out of range, named with ``owner``.
    """
    required = (*TEST_KEYS, "mask_thr_binary") if with_mask else TEST_KEYS
    cfg = _keys(owner, "test_cfg", test_cfg, required, TEST_OPTIONAL)
    cfg["nms"] = check_nms_cfg(owner, cfg["nms"])
    if not 0 <= float(cfg["score_thr"]) < 1:
        raise ValueError(f"{owner}: test_cfg.score_thr must be in [0, 1), got {cfg['score_thr']!r}")
    if not isinstance(cfg["max_per_img"], int):
        raise ValueError(f"{owner}: test_cfg.max_per_img must be an int, got {cfg['max_per_img']!r}")
    if cfg["nms_pre"] is not None and not isinstance(cfg["nms_pre"], int):
        raise ValueError(f"{owner}: test_cfg.nms_pre must be an int (<= 0: all pairs), got {cfg['nms_pre']!r}")
    cfg["min_bbox_size"] = float(cfg.get("min_bbox_size") or 0.0)
    if cfg["min_bbox_size"] < 0:
        raise ValueError(f"{owner}: test_cfg.min_bbox_size must be >= 0, got {cfg['min_bbox_size']!r}")
    if with_mask:
        if not 0 <= float(cfg["mask_thr_binary"]) <= 1:
            raise ValueError(f"{owner}: test_cfg.mask_thr_binary must be in [0, 1], got {cfg['mask_thr_binary']!r}")
    else:
        cfg["mask_thr_binary"] = None
    return cfg


def check_train_cfg(owner: str, train_cfg: dict[str, Any] | None, with_mask: bool) -> dict[str, Any] | None:
    """``train_cfg`` (mmdet's ``train_cfg.rcnn``, or one cascade stage's) validated; None: not used (a model built
    for inference only, whose ``loss`` then refuses).

    Keys: ``assigner`` and ``sampler`` (TASK_UTILS configs), ``pos_weight`` (<= 0: 1) and, with a mask head,
    ``mask_size`` (the mask targets' size, twice the mask RoI size).
    """
    if train_cfg is None:
        return None
    required = (*TRAIN_KEYS, "mask_size") if with_mask else TRAIN_KEYS
    cfg = _keys(owner, "train_cfg", train_cfg, required, TRAIN_OPTIONAL)
    for key in ("assigner", "sampler"):
        if not isinstance(cfg[key], dict) or "type" not in cfg[key]:
            raise ValueError(f"{owner}: train_cfg.{key} must be a config dict with 'type', got {cfg[key]!r}")
    return cfg
