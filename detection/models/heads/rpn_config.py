"""The RPN's train/proposal config (defaults and validation) and which anchors it may train on."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor

TRAIN_CFG_DEFAULTS: dict[str, Any] = dict(
    assigner=dict(type="MaxIoUAssigner", pos_iou_thr=0.7, neg_iou_thr=0.3, min_pos_iou=0.3, match_low_quality=True,
                  ignore_iof_thr=-1),
    sampler=dict(type="RandomSampler", num=256, pos_fraction=0.5, neg_pos_ub=-1, add_gt_as_proposals=False),
    allowed_border=-1,
    pos_weight=-1,
)
TEST_CFG_DEFAULTS: dict[str, Any] = dict(nms_pre=1000, max_per_img=1000, nms=dict(iou_threshold=0.7), min_bbox_size=0)


def check_train_cfg(train_cfg: dict[str, Any] | None) -> dict[str, Any]:
    cfg = dict(train_cfg or {})
    cfg.pop("debug", None)  # mmdet's train_cfg.rpn carries debug: false
    unknown = sorted(set(cfg) - set(TRAIN_CFG_DEFAULTS))
    if unknown:
        raise ValueError(f"RPNHead: unknown train_cfg keys {unknown}; accepted: {sorted(TRAIN_CFG_DEFAULTS)}")
    return {**TRAIN_CFG_DEFAULTS, **cfg}


def check_proposal_cfg(cfg: dict[str, Any] | None, what: str = "test_cfg") -> dict[str, Any]:
    """Validate a proposal config (``test_cfg.rpn`` / ``train_cfg.rpn_proposal``) and fill its defaults.

    Keys: ``nms_pre`` (best anchors kept per level before NMS, 1000), ``max_per_img`` (proposals kept after NMS,
    1000), ``nms: {iou_threshold: 0.7}`` (``type: nms`` allowed), ``min_bbox_size`` (boxes need width and height
    above it, 0).

    Raises:
        ValueError: an unknown key or an out-of-range value, named with ``what``.
    """
    cfg = dict(cfg or {})
    unknown = sorted(set(cfg) - set(TEST_CFG_DEFAULTS))
    if unknown:
        raise ValueError(f"RPNHead: unknown {what} keys {unknown}; accepted: {sorted(TEST_CFG_DEFAULTS)}")
    nms = dict(cfg.get("nms") or {})
    if sorted(set(nms) - {"iou_threshold", "type"}) or nms.get("type", "nms") != "nms":
        raise ValueError(f"RPNHead: {what}.nms={nms} is invalid; expected {{iou_threshold: 0.7}} (and type: nms)")
    nms.setdefault("iou_threshold", TEST_CFG_DEFAULTS["nms"]["iou_threshold"])
    out = {**TEST_CFG_DEFAULTS, **cfg, "nms": nms}
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
