"""Model outputs -> per-image results in original image pixels, mirroring the PyTorch models' predict paths.

Segmentation (segmentation/models/segmentors/encoder_decoder.py ``postprocess_result``): crop the padding off
(``img_shape``), resize to ``ori_shape`` (bilinear with PyTorch's ``F.interpolate`` index rule for logits and
probabilities, then argmax; nearest for an in-graph argmax label map, the only choice for labels).
Detection (detection/models/heads/yolov3_head.py ``predict_by_feat``): boxes in input pixels -> divided by
``scale_factor`` (w, h) and clipped to the original image; for raw head outputs the predictor first clips to
``img_shape`` and runs the same multi-class NMS (deploy/python/nms.py). Mask models (``postprocess.masks``,
a ``masks [B, M, h, w]`` output of probabilities): each detection's mask is pasted over its box in the original
image (``oars_deploy.mask_paste``, the sampling of the models' ``paste_masks``), as ``FCNMaskHead`` does.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from oars_deploy.arrays import module_of, to_numpy
from oars_deploy.errors import DeployError
from oars_deploy.mask_paste import PASTE_MODES, paste_masks
from oars_deploy.nms import multiclass_nms

SEG_OUTPUT_OPS = {"argmax": "label", "softmax": "prob", "none": "logits"}


def _source_index(out_size: int, in_size: int, align_corners: bool, xp: ModuleType) -> tuple[Any, Any, Any]:
    """PyTorch's bilinear source indices (i0, i1) and weight of i1 for each output position (float32 math)."""
    dst = xp.arange(out_size, dtype=xp.float32)
    if align_corners:
        scale = np.float32((in_size - 1) / (out_size - 1)) if out_size > 1 else np.float32(0)
        src = dst * scale
    else:
        # scale * (dst + 0.5) - 0.5 with one rounding, as PyTorch's compiled kernel (fused multiply-add) gets it
        scale = float(np.float32(in_size / out_size))
        src = xp.maximum((scale * (dst.astype(xp.float64) + 0.5) - 0.5).astype(xp.float32), np.float32(0))
    i0 = xp.minimum(xp.floor(src).astype(xp.int64), in_size - 1)
    i1 = xp.minimum(i0 + 1, in_size - 1)
    lam = xp.clip(src - i0.astype(xp.float32), 0, 1).astype(xp.float32)
    return i0, i1, lam


def resize_bilinear(x: Any, size: tuple[int, int], align_corners: bool = False) -> Any:
    """[C, H, W] float -> [C, h, w], as ``F.interpolate(mode='bilinear', align_corners=...)`` (no antialias)."""
    xp = module_of(x)
    h, w = size
    if tuple(x.shape[-2:]) == (h, w):
        return x
    y0, y1, ly = _source_index(h, x.shape[-2], align_corners, xp)
    x0, x1, lx = _source_index(w, x.shape[-1], align_corners, xp)
    top = x[:, y0, :]
    bottom = x[:, y1, :]
    rows = top * (1 - ly)[None, :, None] + bottom * ly[None, :, None]
    return rows[:, :, x0] * (1 - lx)[None, None, :] + rows[:, :, x1] * lx[None, None, :]


def resize_nearest(x: Any, size: tuple[int, int]) -> Any:
    """[..., H, W] -> [..., h, w] by OpenCV's / PyTorch's 'nearest' rule: src = min(floor(dst * in / out), in - 1)."""
    xp = module_of(x)
    h, w = size
    ih, iw = x.shape[-2:]
    if (ih, iw) == (h, w):
        return x
    ys = xp.minimum(xp.floor(xp.arange(h) * (ih / h)).astype(xp.int64), ih - 1)
    xs = xp.minimum(xp.floor(xp.arange(w) * (iw / w)).astype(xp.int64), iw - 1)
    return x[..., ys[:, None], xs[None, :]]


def _pick(outputs: dict[str, Any], name: str, what: str) -> Any:
    if name in outputs:
        return outputs[name]
    if len(outputs) == 1:
        return next(iter(outputs.values()))
    raise DeployError(f"the model has no output {name!r} ({what}); its outputs are {sorted(outputs)}")


def segmentation(outputs: dict[str, Any], metas: list[dict], post: dict) -> list[dict]:
    """Per image ``{'label': [H, W] int64}`` at the original size (NumPy).

    ``post``: ``output_op`` (argmax | softmax | none), ``resize_to_original`` (bilinear: scores resized then
    argmax, as PyTorch; nearest: argmax at the input size, then the label map resized), ``crop_to_resized``
    (default true: drop the bottom/right padding first), ``align_corners`` (default false, the segmentor's).
    """
    op = post.get("output_op", "argmax")
    if op not in SEG_OUTPUT_OPS:
        raise DeployError(f"deploy.yaml postprocess.output_op must be one of {list(SEG_OUTPUT_OPS)}, got {op!r}")
    mode = post.get("resize_to_original", "nearest" if op == "argmax" else "bilinear")
    if mode not in ("nearest", "bilinear") or (op == "argmax" and mode != "nearest"):
        raise DeployError(f"deploy.yaml postprocess.resize_to_original must be 'nearest' or 'bilinear' ('nearest' "
                          f"for output_op argmax), got {mode!r} with output_op {op!r}")
    out = _pick(outputs, SEG_OUTPUT_OPS[op], f"output_op {op}")
    crop = bool(post.get("crop_to_resized", True))
    align_corners = bool(post.get("align_corners", False))
    results = []
    for i, meta in enumerate(metas):
        h, w = meta["img_shape"] if crop else out.shape[-2:]
        ori = tuple(meta["ori_shape"])
        if op == "argmax":
            label = resize_nearest(out[i, :h, :w], ori)
        elif mode == "nearest":
            label = resize_nearest(out[i, :, :h, :w].argmax(0), ori)
        else:
            label = resize_bilinear(out[i, :, :h, :w].astype("float32"), ori, align_corners).argmax(0)
        results.append({"label": to_numpy(label).astype(np.int64)})
    return results


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
    return dict(score_thr=float(post["score_thr"]), iou_threshold=float(post["iou_threshold"]),
                max_per_img=post.get("max_per_img", 100), nms_pre=post.get("nms_pre", 1000))


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
        b, s, lab = multiclass_nms(boxes, scores, **settings)
        results.append({"bboxes": _to_original(b, meta), "scores": s, "labels": lab})
    return results
