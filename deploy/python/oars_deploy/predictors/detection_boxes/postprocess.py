"""Model outputs -> per-image boxes in original image pixels, mirroring the PyTorch detectors' predict path
(detection/models/heads/yolov3_head.py ``predict_by_feat``): boxes in input pixels -> divided by ``scale_factor``
(w, h) and clipped to the original image; for raw head outputs the predictor first clips to ``img_shape`` and runs
the same multi-class NMS (:mod:`oars_deploy.nms`; soft-NMS, :mod:`oars_deploy.soft_nms`, when
``postprocess.nms`` asks for it); the raw head maps of ``export.postprocess: raw`` (``postprocess.decode``) are
decoded by :mod:`.decode` first (boxes clipped to the network input, as the exported graphs). Mask models
(``postprocess.masks``, a ``masks [B, M, h, w]`` output of probabilities): each detection's mask is pasted over
its box in the original image (:mod:`oars_deploy.mask_paste`, the sampling of the models' ``paste_masks``), as
``FCNMaskHead`` does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from oars_deploy.arrays import to_numpy
from oars_deploy.errors import DeployError
from oars_deploy.mask_paste import PASTE_MODES, paste_masks
from oars_deploy.nms import multiclass_nms
from oars_deploy.predictors.detection_boxes.decode import decode
from oars_deploy.soft_nms import multiclass_soft_nms, soft_nms_settings


def _to_original(boxes: np.ndarray, meta: dict) -> np.ndarray:
    """Input pixels -> original pixels: divide by scale_factor (w, h), clip to [0, ori_w] x [0, ori_h] (float32)."""
    sw, sh = meta["scale_factor"]
    ori_h, ori_w = meta["ori_shape"]
    boxes = boxes.astype(np.float32) / np.asarray([sw, sh, sw, sh], dtype=np.float32)
    return np.minimum(np.maximum(boxes, 0), np.asarray([ori_w, ori_h, ori_w, ori_h], dtype=np.float32))


def _nms_settings(post: dict) -> dict:
    missing = [k for k in ("score_thr", "iou_threshold") if k not in post]
    if missing:
        raise DeployError(f"deploy.yaml postprocess (raw detection outputs) lacks {missing}; needed for NMS")
    settings = dict(score_thr=float(post["score_thr"]), iou_threshold=float(post["iou_threshold"]),
                    max_per_img=post.get("max_per_img", 100), nms_pre=post.get("nms_pre", 1000))
    if "nms" in post:  # the model's test_cfg.nms of type soft_nms
        settings.update(soft_nms_settings(post["nms"], "deploy.yaml postprocess.nms"))
    return settings


def _mask_settings(post: dict, outputs: dict[str, Any]) -> tuple[str, float, str] | None:
    """(output name, threshold, paste mode) of ``postprocess.masks``; None for a box-only model."""
    spec = post.get("masks")
    if not spec:
        return None
    name = spec.get("output", "masks") if isinstance(spec, dict) else None
    if name is None or "threshold" not in spec:
        raise DeployError(f"deploy.yaml postprocess.masks must be {{output: masks, size: [h, w], threshold: 0.5}}, "
                          f"got {spec!r}")
    if name not in outputs or np.ndim(outputs[name]) != 4:
        raise DeployError(f"deploy.yaml postprocess.masks names output {name!r} [B, M, h, w]; the model's outputs "
                          f"are {sorted(outputs)}")
    mode = spec.get("paste", "mmdet")
    if mode not in PASTE_MODES:
        raise DeployError(f"deploy.yaml postprocess.masks.paste={mode!r} is not supported; accepted: "
                          f"{list(PASTE_MODES)}")
    return name, float(spec["threshold"]), mode


def detection(outputs: dict[str, Any], metas: list[dict], post: dict) -> list[dict]:
    """Per image ``{'bboxes' [K, 4] float32 xyxy, 'scores' [K] float32, 'labels' [K] int64}`` in original pixels,
    and ``'masks'`` bool ``[K, ori_H, ori_W]`` for mask models."""
    outputs = {k: to_numpy(v) for k, v in outputs.items()}
    inside = list(post.get("inside_graph", []))
    results = []
    if "nms" in inside:
        need = ("num_dets", "boxes", "scores", "labels")
        if any(k not in outputs for k in need):
            raise DeployError(f"a detection model with NMS in the graph needs outputs {list(need)}, has "
                              f"{sorted(outputs)}")
        in_input_pixels = post.get("boxes_in", "input_pixels") == "input_pixels"
        masks = _mask_settings(post, outputs)
        for i, meta in enumerate(metas):
            n = int(outputs["num_dets"][i])
            boxes = outputs["boxes"][i, :n].astype(np.float32)
            boxes = _to_original(boxes, meta) if in_input_pixels else boxes
            result = {"bboxes": boxes, "scores": outputs["scores"][i, :n].astype(np.float32),
                      "labels": outputs["labels"][i, :n].astype(np.int64)}
            if masks is not None:
                name, threshold, mode = masks
                result["masks"] = paste_masks(outputs[name][i, :n], boxes, tuple(meta["ori_shape"])[:2], threshold,
                                              mode)
            results.append(result)
        return results
    if "decode" in post:  # export.postprocess: raw: the head's maps, decoded here as the graph would
        boxes_all, scores_all = decode(outputs, post)
        settings = _nms_settings(post)
        nms = multiclass_soft_nms if "method" in settings else multiclass_nms
        for i, meta in enumerate(metas):
            b, s, lab = nms(boxes_all[i], scores_all[i], **settings)
            results.append({"bboxes": _to_original(b, meta), "scores": s, "labels": lab})
        return results
    if "boxes" not in outputs or "scores" not in outputs:
        raise DeployError(f"a raw detection model needs outputs 'boxes' [B, N, 4] and 'scores' [B, N, C], has "
                          f"{sorted(outputs)}")
    settings = _nms_settings(post)
    conf_thr = post.get("conf_thr")
    for i, meta in enumerate(metas):
        scores = outputs["scores"][i].astype(np.float32)
        if "objectness" in outputs and conf_thr is not None:  # obj <= conf_thr zeroes the row (YOLOv3 predict)
            obj = outputs["objectness"][i].reshape(-1, 1)
            scores = np.where(obj > conf_thr, scores, np.float32(0))
        img_h, img_w = meta["img_shape"]
        boxes = np.clip(outputs["boxes"][i].astype(np.float32),
                        0, np.asarray([img_w, img_h, img_w, img_h], dtype=np.float32))
        nms = multiclass_soft_nms if "method" in settings else multiclass_nms
        b, s, lab = nms(boxes, scores, **settings)
        results.append({"bboxes": _to_original(b, meta), "scores": s, "labels": lab})
    return results
