"""The RPN's train/proposal config (required keys and validation; the values are in the base model YAML files)
and which anchors it may train on."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor

TRAIN_KEYS = ("assigner", "sampler", "allowed_border", "pos_weight")
PROPOSAL_KEYS = ("nms_pre", "max_per_img", "nms", "min_bbox_size")
WHERE = "the base model YAML states them, e.g. configs/_base_/models/faster_rcnn_r50_fpn.yaml"


def _keys(what: str, cfg: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(cfg, dict):
        raise ValueError(f"RPNHead: {what} must be a dict with the keys {list(keys)} ({WHERE}), got {cfg!r}")
    unknown = sorted(set(cfg) - set(keys))
    if unknown:
        raise ValueError(f"RPNHead: unknown {what} keys {unknown}; accepted: {sorted(keys)}")
    missing = [k for k in keys if k not in cfg]
    if missing:
        raise ValueError(f"RPNHead: {what} lacks {missing}; required: {list(keys)} ({WHERE})")
    return dict(cfg)


def check_train_cfg(train_cfg: dict[str, Any] | None) -> dict[str, Any] | None:
    """Validate mmdet's ``train_cfg.rpn``: ``assigner``, ``sampler`` (TASK_UTILS configs), ``allowed_border``
    (-1: every anchor inside the un-padded image) and ``pos_weight`` (<= 0: 1); None: not used (inference only).

    Raises:
        ValueError: an unknown or missing key.
    """
    if train_cfg is None:
        return None
    cfg = dict(train_cfg)
    cfg.pop("debug", None)  # mmdet's train_cfg.rpn carries debug: false
    cfg = _keys("train_cfg", cfg, TRAIN_KEYS)
    for key in ("assigner", "sampler"):
        if not isinstance(cfg[key], dict) or "type" not in cfg[key]:
            raise ValueError(f"RPNHead: train_cfg.{key} must be a config dict with 'type', got {cfg[key]!r}")
    return cfg


def check_proposal_cfg(cfg: dict[str, Any] | None, what: str = "test_cfg") -> dict[str, Any]:
    """Validate a proposal config (``test_cfg.rpn`` / ``train_cfg.rpn_proposal``).

    Keys (all required): ``nms_pre`` (best anchors kept per level before NMS), ``max_per_img`` (proposals kept
    after NMS), ``nms: {iou_threshold}`` (``type: nms`` allowed), ``min_bbox_size`` (boxes need width and height
    above it).

    Raises:
        ValueError: a missing or unknown key or an out-of-range value, named with ``what``.
    """
    out = _keys(what, cfg, PROPOSAL_KEYS)
    nms = out["nms"]
    if not isinstance(nms, dict) or sorted(set(nms) - {"iou_threshold", "type"}) or "iou_threshold" not in nms \
            or nms.get("type", "nms") != "nms":
        raise ValueError(f"RPNHead: {what}.nms={nms} is invalid; expected {{iou_threshold: 0.7}} (and type: nms)")
    out["nms"] = dict(nms)
    for key in ("nms_pre", "max_per_img"):
        if not isinstance(out[key], int) or isinstance(out[key], bool) or out[key] < 1:
            raise ValueError(f"RPNHead: {what}.{key} must be an int >= 1, got {out[key]!r}")
    if not 0 < float(nms["iou_threshold"]) <= 1:
        raise ValueError(f"RPNHead: {what}.nms.iou_threshold must be in (0, 1], got {nms['iou_threshold']!r}")
    if float(out["min_bbox_size"]) < 0:
        raise ValueError(f"RPNHead: {what}.min_bbox_size must be >= 0, got {out['min_bbox_size']!r}")
    return out


def anchor_inside_flags(anchors: Tensor, valid_flags: Tensor, img_shape: Sequence[int], allowed_border: float
                        ) -> Tensor:
    """Which anchors take part in training (MMDetection's ``anchor_inside_flags``).

    Args:
        anchors: ``[N, 4]`` xyxy float anchors.
        valid_flags: ``[N]`` bool, the anchor's cell lies inside the image (not in batch padding).
        img_shape: ``(H, W)`` of the image before batch padding.
        allowed_border: ``< 0``: every valid anchor; else also ``x1, y1 >= -border`` and
            ``x2 < W + border``, ``y2 < H + border``.

    Returns:
        ``[N]`` bool.
    """
    if allowed_border < 0:
        return valid_flags
    h, w = float(img_shape[0]), float(img_shape[1])
    b = float(allowed_border)
    return (valid_flags & (anchors[:, 0] >= -b) & (anchors[:, 1] >= -b) & (anchors[:, 2] < w + b)
            & (anchors[:, 3] < h + b))
