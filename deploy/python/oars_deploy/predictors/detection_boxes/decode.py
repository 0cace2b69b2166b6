"""Raw head maps -> boxes and candidate scores, in NumPy: the decoding of a one-stage detector exported with
``export.postprocess: raw`` (``postprocess.decode`` in deploy.yaml), which the graph leaves to the runtime.

Why it exists: formats such as ncnn cannot hold the decode's TopK, comparisons and NMS, so the raw export ends at
the head's convolutions (per level class logits, box regressions, FCOS centerness, YOLOv3 objectness) and this one
generic decoder, driven only by deploy.yaml, does the rest as the exported decode graph does (same priors, box
coder, score activation and candidate selection, boxes clipped to the network input); the plug-in then runs the
runtime's multi-class NMS (:mod:`oars_deploy.nms`) and keeps ``max_per_img``.

``postprocess.decode`` (written by the export; every number comes from the model's head and test_cfg)::

    input_hw: [H, W]                  # the network input: boxes are clipped to it
    prior_order: position_major       # within a level: row, column, anchor (anchor_major: anchor, row, column)
    levels: [{stride: [sx, sy], base_anchors: [[x1, y1, x2, y2], ...]}, ...]   # priors = base + (j sx, i sy)
    fields:                           # where each quantity is: one output per level, `channels` per prior
      scores: {outputs: [cls_0, ...], channels: C, start: 0, count: C}
      boxes: {outputs: [reg_0, ...], channels: 4, start: 0, count: 4}
      centerness / objectness: (optional, count 1)
    box_coder: {type: delta_xywh, means: [4], stds: [4] (or weights: [4]), clamp: [lo, hi]}
               | {type: distance}     # distances in prior sizes from the prior's centre (FCOS)
               | {type: yolo, scale_x_y: 1.0, max_log_wh: 10.0}
    score: {activation: sigmoid | softmax, combine: none | centerness | objectness}
    candidates: {per_level_top_k: k} | {per_class_top_k: k} | {}
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from oars_deploy.errors import DeployError

WHERE = "deploy.yaml postprocess.decode"
PRIOR_ORDERS = ("position_major", "anchor_major")
BOX_CODERS = ("delta_xywh", "distance", "yolo")
ACTIVATIONS = ("sigmoid", "softmax")
COMBINES = ("none", "centerness", "objectness")


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return (1.0 / (1.0 + np.exp(-x))).astype(np.float32)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)


def _need(section: Mapping, key: str, where: str) -> Any:
    if not isinstance(section, Mapping) or key not in section:
        raise DeployError(f"{where} lacks {key!r}; re-export the model with export.postprocess: raw")
    return section[key]


def _choice(value: Any, accepted: Sequence[str], where: str) -> str:
    if value not in accepted:
        raise DeployError(f"{where}={value!r} is not supported; accepted: {list(accepted)}")
    return str(value)


def field_maps(outputs: Mapping[str, np.ndarray], field: Mapping, order: str, where: str) -> list[np.ndarray]:
    """One quantity of every level as ``[B, N_l, count]`` float32 rows in the prior order of the level.

    Args:
        outputs: the model outputs by name; a level's map is ``[B, A * channels, H, W]``.
        field: ``{outputs: [name per level], channels, start, count}``.
        order: ``position_major`` (row, column, anchor) or ``anchor_major`` (anchor, row, column).
        where: the deploy.yaml key, for messages.
    """
    names = list(_need(field, "outputs", where))
    channels, start = int(_need(field, "channels", where)), int(field.get("start", 0))
    count = int(field.get("count", channels))
    levels = []
    for name in names:
        if name not in outputs:
            raise DeployError(f"{where} names output {name!r}; the model's outputs are {sorted(outputs)}")
        m = np.asarray(outputs[name], dtype=np.float32)
        if m.ndim != 4 or m.shape[1] % channels:
            raise DeployError(f"{where}: output {name!r} must be [B, A * {channels}, H, W], got {list(m.shape)}")
        b, c, h, w = m.shape
        m = m.reshape(b, c // channels, channels, h, w)
        m = m.transpose(0, 3, 4, 1, 2) if order == "position_major" else m.transpose(0, 1, 3, 4, 2)
        levels.append(m.reshape(b, -1, channels)[..., start:start + count])
    return levels


def grid_priors(levels: Sequence[Mapping], sizes: Sequence[tuple[int, int]], order: str) -> list[np.ndarray]:
    """Per level ``[H * W * A, 4]`` float32 xyxy priors: ``base_anchors`` shifted by ``(j * sx, i * sy)`` at row i,
    column j, in ``order`` (the anchor generators' tiling; the export checked it against the head's own priors)."""
    priors = []
    for level, (h, w) in zip(levels, sizes):
        sx, sy = (float(s) for s in level["stride"])
        base = np.asarray(level["base_anchors"], dtype=np.float32).reshape(-1, 4)
        xs = np.arange(w, dtype=np.float32) * np.float32(sx)
        ys = np.arange(h, dtype=np.float32) * np.float32(sy)
        yy, xx = np.meshgrid(ys, xs, indexing="ij")
        shifts = np.stack([xx, yy, xx, yy], axis=-1).reshape(-1, 4)
        tiled = shifts[:, None] + base[None] if order == "position_major" else base[:, None] + shifts[None]
        priors.append(tiled.reshape(-1, 4).astype(np.float32))
    return priors


@lru_cache(maxsize=16)
def _cached_priors(levels_json: str, sizes: tuple[tuple[int, int], ...],
                   order: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The concatenated priors ``[N, 4]`` and per-prior strides ``[N, 2]`` of one export at one input size, computed
    once (an export's priors are the same for every image), and each level's prior count; read-only arrays."""
    levels = json.loads(levels_json)
    priors = grid_priors(levels, sizes, order)
    strides = np.concatenate([np.broadcast_to(np.asarray(lv["stride"], np.float32), (len(p), 2))
                              for lv, p in zip(levels, priors)])
    counts = np.asarray([len(p) for p in priors])
    joined = np.concatenate(priors)
    for array in (joined, strides, counts):
        array.setflags(write=False)
    return joined, strides, counts


def decode_boxes(priors: np.ndarray, raw: np.ndarray, strides: np.ndarray, coder: Mapping) -> np.ndarray:
    """``raw [B, N, 4]`` box regressions against ``priors [N, 4]`` -> xyxy boxes ``[B, N, 4]`` float32 (the
    head's box coder: see the module docstring; ``strides [N, 2]`` (sx, sy) per prior serve YOLOv3's)."""
    kind = _choice(coder.get("type"), BOX_CODERS, f"{WHERE}.box_coder.type")
    x1, y1, x2, y2 = (priors[:, k] for k in range(4))
    if kind == "distance":  # FCOS: torchvision's BoxLinearCoder(normalize_by_size=True)
        cx, cy, w, h = 0.5 * (x1 + x2), 0.5 * (y1 + y2), x2 - x1, y2 - y1
        d = raw * np.stack([w, h, w, h], axis=-1)
        return np.stack([cx - d[..., 0], cy - d[..., 1], cx + d[..., 2], cy + d[..., 3]], axis=-1).astype(np.float32)
    if kind == "yolo":  # xy = (sigmoid(t) [* s - (s - 1) / 2] + cell) * stride, wh = exp(t) * anchor
        s = float(coder.get("scale_x_y", 1.0))
        xy = _sigmoid(raw[..., :2])
        if s != 1.0:
            xy = xy * np.float32(s) - np.float32(0.5 * (s - 1.0))
        centre = np.stack([0.5 * (x1 + x2), 0.5 * (y1 + y2)], axis=-1)
        xy = xy * strides + centre
        with np.errstate(over="ignore"):
            wh = np.exp(np.minimum(raw[..., 2:4], np.float32(coder.get("max_log_wh", 10.0))))
        wh = wh * np.stack([x2 - x1, y2 - y1], axis=-1)
        return np.concatenate([xy - wh / 2, xy + wh / 2], axis=-1).astype(np.float32)
    if "weights" in coder:  # torchvision's BoxCoder: deltas divided by the weights
        d = raw / np.asarray(coder["weights"], dtype=np.float32)
    else:
        d = raw * np.asarray(coder.get("stds", [1.0] * 4), np.float32) + np.asarray(coder.get("means", [0.0] * 4),
                                                                                   np.float32)
    lo, hi = (coder.get("clamp") or [None, None])[:2]
    dwh = np.clip(d[..., 2:4], -np.inf if lo is None else lo, np.inf if hi is None else hi)
    pw, ph = x2 - x1, y2 - y1
    px, py = x1 + 0.5 * pw, y1 + 0.5 * ph
    with np.errstate(over="ignore"):
        gw, gh = pw * np.exp(dwh[..., 0]), ph * np.exp(dwh[..., 1])
    gx, gy = px + pw * d[..., 0], py + ph * d[..., 1]
    return np.stack([gx - 0.5 * gw, gy - 0.5 * gh, gx + 0.5 * gw, gy + 0.5 * gh], axis=-1).astype(np.float32)


def _scores(outputs: Mapping[str, np.ndarray], fields: Mapping, order: str, score: Mapping, num_classes: int,
            conf_thr: float | None) -> list[np.ndarray]:
    """Per level ``[B, N_l, C]`` scores of the head's predict (before candidate selection)."""
    activation = _choice(score.get("activation", "sigmoid"), ACTIVATIONS, f"{WHERE}.score.activation")
    combine = _choice(score.get("combine", "none"), COMBINES, f"{WHERE}.score.combine")
    logits = field_maps(outputs, _need(fields, "scores", f"{WHERE}.fields"), order, f"{WHERE}.fields.scores")
    if activation == "softmax":  # background last, dropped after the softmax
        levels = [_softmax(x)[..., :num_classes] for x in logits]
    else:
        levels = [_sigmoid(x) for x in logits]
    if combine == "none":
        return levels
    other = field_maps(outputs, _need(fields, combine, f"{WHERE}.fields"), order, f"{WHERE}.fields.{combine}")
    if combine == "centerness":  # FCOS: sqrt(class probability * centerness)
        return [np.sqrt(p * _sigmoid(c)).astype(np.float32) for p, c in zip(levels, other)]
    if conf_thr is None:
        raise DeployError(f"{WHERE}.score.combine=objectness needs postprocess.conf_thr")
    objs = [_sigmoid(o) for o in other]  # YOLOv3: obj * class probability where obj > conf_thr
    return [np.where(o > np.float32(conf_thr), o * p, np.float32(0)).astype(np.float32) for p, o in zip(levels, objs)]


def top_k_mask(values: np.ndarray, k: int, axis: int) -> np.ndarray:
    """Exactly the ``k`` largest of ``values`` along ``axis``, ties broken toward the lower index (ONNX ``TopK``'s
    rule, which the exported graphs follow).

    Why not ``values >= k-th largest``: with ties at the k-th value that keeps every tied entry. A model whose scores
    are flat (random or early weights: every SSD score 1/91) then sends all priors x classes to the NMS, 10x the
    graph's candidates and seconds per image instead of milliseconds.

    Args:
        values: float array, any shape.
        k: entries kept along ``axis`` (all when ``k`` >= the axis' length).
        axis: the axis ranked.

    Returns:
        bool array of ``values.shape``, ``k`` True entries along ``axis`` (fewer only when the axis is shorter).
    """
    n = values.shape[axis]
    if k >= n:
        return np.ones(values.shape, dtype=bool)
    kth = np.take(np.partition(values, n - k, axis=axis), [n - k], axis=axis)
    above = values > kth
    room = k - above.sum(axis=axis, keepdims=True)  # how many of the tied entries still fit
    tied = values == kth
    return above | (tied & (np.cumsum(tied, axis=axis) <= room))


def select(levels: list[np.ndarray], candidates: Mapping, score_thr: float) -> np.ndarray:
    """Zero the (prior, class) pairs that are not candidates; returns ``[B, N, C]`` over all levels.

    ``per_level_top_k: k``: score > score_thr and among the k best pairs of its image and level (RetinaNet, FCOS);
    ``per_class_top_k: k``: score > score_thr and among the k best priors of its class (SSD); neither: score >
    score_thr is left to the NMS (which also applies a global ``nms_pre``).
    """
    thr = np.float32(score_thr)
    k_level = int(candidates.get("per_level_top_k") or 0)
    if k_level > 0:
        kept = []
        for s in levels:
            b, n, c = s.shape
            flat = s.reshape(b, n * c)
            kept.append(np.where((flat > thr) & top_k_mask(flat, k_level, 1), flat, np.float32(0)).reshape(b, n, c))
        return np.concatenate(kept, axis=1)
    scores = np.concatenate(levels, axis=1)
    keep = scores > thr
    k_class = min(int(candidates.get("per_class_top_k") or 0), scores.shape[1])
    if k_class > 0:
        keep &= top_k_mask(scores, k_class, 1)
    return np.where(keep, scores, np.float32(0)).astype(np.float32)


def decode(outputs: Mapping[str, Any], post: Mapping) -> tuple[np.ndarray, np.ndarray]:
    """The raw maps of a batch -> ``(boxes [B, N, 4] xyxy input pixels clipped to the input, scores [B, N, C]``,
    0 where a (prior, class) pair is not a candidate), what the exported decode graph gives.

    Raises:
        DeployError: ``postprocess.decode`` is incomplete or does not fit the model's outputs (naming the key).
    """
    spec = _need(post, "decode", "deploy.yaml postprocess")
    order = _choice(spec.get("prior_order", "position_major"), PRIOR_ORDERS, f"{WHERE}.prior_order")
    fields, levels = _need(spec, "fields", WHERE), list(_need(spec, "levels", WHERE))
    num_classes = int(_need(post, "num_classes", "deploy.yaml postprocess"))
    raw_boxes = field_maps(outputs, _need(fields, "boxes", f"{WHERE}.fields"), order, f"{WHERE}.fields.boxes")
    if len(raw_boxes) != len(levels):
        raise DeployError(f"{WHERE}: {len(levels)} levels but {len(raw_boxes)} box outputs")
    names = list(fields["boxes"]["outputs"])
    sizes = [tuple(int(v) for v in np.shape(outputs[n])[-2:]) for n in names]
    # the priors of an export at an input size are computed once, not per image batch
    priors, strides, counts = _cached_priors(json.dumps(levels, sort_keys=True), tuple(sizes), order)
    for name, count, r in zip(names, counts, raw_boxes):
        if count != r.shape[1]:
            raise DeployError(f"{WHERE}: output {name!r} holds {r.shape[1]} priors, its level's base_anchors make "
                              f"{count}")
    boxes = decode_boxes(priors, np.concatenate(raw_boxes, axis=1), strides, _need(spec, "box_coder", WHERE))
    h, w = (float(v) for v in _need(spec, "input_hw", WHERE))
    boxes = np.clip(boxes, 0, np.asarray([w, h, w, h], np.float32)).astype(np.float32)
    per_level = _scores(outputs, fields, order, spec.get("score") or {}, num_classes, post.get("conf_thr"))
    scores = select(per_level, spec.get("candidates") or {}, float(_need(post, "score_thr", "deploy.yaml postprocess")))
    return boxes, scores
