"""The deploy.yaml of a temporal action localiser exported with its recognizer (``predictor: video_segments``).

``tools/export.py`` of a BMN config writes (``video.export_localizer``):

- ``input``: the localiser's ``features`` [B, C, T] (layout ``NCT``; C the recognizer's feature width, T =
  ``segments.tscale``), ``outputs`` ``confidence`` [B, 2, D, T], ``start`` / ``end`` [B, T], ``preprocess``: [];
- ``labels``: the recognizer's class names (detections are labelled with them);
- ``segments``:

  - ``recognizer``: ``{onnx, input: {name, shape, layout, ...}, features, scores, feat_dim, num_classes,
    sampling, preprocess}``: the second graph (clips -> pooled features [N, C] and class probabilities [N, K]),
    its clip input and the clip predictors' ``sampling`` / video ``preprocess`` schema
    (:mod:`oars_deploy.predictors.clip_classes.config`), applied to each snippet;
  - ``snippet``, ``stride``: frames per snippet and between snippet starts (:mod:`.segments.snippets`);
  - ``tscale``, ``dscale``, ``align_corners``: the localiser's temporal scale, longest proposal and the resize rule
    (:mod:`.segments.temporal`);
  - ``soft_nms``: ``{alpha, low_threshold, high_threshold, top_k}``; ``max_proposals``: kept after it;
  - ``top_k``: video-level classes paired with each proposal (:mod:`.segments.classify`).

A C-TCN export (``video.export_ctcn``) has ``segments.localizer: ctcn`` (absent: ``bmn``, the exports made before
the key existed), outputs ``offsets`` [B, A, 2] and ``probs`` [B, A, K + 1], ``labels`` = its own K classes, and
instead of ``dscale`` / ``soft_nms`` / ``top_k``: ``anchors`` (an .npy file in the folder, float [A, 2] centre and
width), ``num_anchors`` (A), ``num_classes`` (K), ``decode`` (``variances`` [2] and the thresholds and caps of
:func:`.segments.ctcn_decode.ctcn_detections`) and ``max_proposals``.
"""

from __future__ import annotations

from typing import Any

from oars_deploy.errors import DeployError
from oars_deploy.predictors.clip_classes.config import validate_video
from oars_deploy.predictors.video_segments.segments.ctcn_decode import DECODE_KEYS

SECTION = "segments"
SOFT_NMS_KEYS = ("alpha", "low_threshold", "high_threshold", "top_k")
LOCALIZERS = ("bmn", "ctcn")
CTCN_INT_KEYS = ("pre_nms_top_k", "max_per_video")


def localizer_of(seg: dict) -> str:
    """Which post-processing a ``segments`` section asks for: its ``localizer`` key, ``bmn`` when absent."""
    return str(seg.get("localizer", "bmn"))


def _int(value: Any, where: str, path: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise DeployError(f"{path}: {where} must be an int >= {minimum}, got {value!r}")
    return value


def _number(value: Any, where: str, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise DeployError(f"{path}: {where} must be a number, got {value!r}")
    return float(value)


def validate_segments(data: dict, path: str) -> None:
    """Check the ``segments`` section, the localiser's input and the recognizer's clip input, sampling and steps;
    :class:`DeployError` naming ``path`` and the key."""
    seg = data.get(SECTION)
    if not isinstance(seg, dict):
        raise DeployError(f"{path}: {SECTION} must be a mapping, got {seg!r}")
    rec = seg.get("recognizer")
    if not isinstance(rec, dict):
        raise DeployError(f"{path}: {SECTION}.recognizer must be a mapping, got {rec!r}")
    for key in ("onnx", "features", "scores"):
        if not isinstance(rec.get(key), str) or not rec[key]:
            raise DeployError(f"{path}: {SECTION}.recognizer.{key} must be a name, got {rec.get(key)!r}")
    if not isinstance(rec.get("input"), dict) or not isinstance(rec["input"].get("name"), str):
        raise DeployError(f"{path}: {SECTION}.recognizer.input must be a mapping with a name, got {rec.get('input')!r}")
    validate_video({"sampling": rec.get("sampling"), "input": rec["input"], "preprocess": rec.get("preprocess")},
                   f"{path} ({SECTION}.recognizer)")
    feat_dim = _int(rec.get("feat_dim"), f"{SECTION}.recognizer.feat_dim", path)
    _int(rec.get("num_classes"), f"{SECTION}.recognizer.num_classes", path)
    for key in ("snippet", "stride", "tscale", "max_proposals"):
        _int(seg.get(key), f"{SECTION}.{key}", path)
    if not isinstance(seg.get("align_corners", False), bool):
        raise DeployError(f"{path}: {SECTION}.align_corners must be true or false, got {seg.get('align_corners')!r}")
    shape = data["input"]["shape"]
    if not isinstance(shape, list) or len(shape) != 3 or list(shape[1:]) != [feat_dim, seg["tscale"]]:
        raise DeployError(f"{path}: input.shape must be [B, feat_dim={feat_dim}, tscale={seg['tscale']}] (the "
                          f"localiser's features), got {shape!r}")
    kind = localizer_of(seg)
    if kind not in LOCALIZERS:
        raise DeployError(f"{path}: {SECTION}.localizer must be one of {list(LOCALIZERS)}, got {kind!r}")
    (_validate_ctcn if kind == "ctcn" else _validate_bmn)(data, seg, path)


def _outputs(data: dict, wanted: tuple[str, ...], path: str, what: str) -> dict:
    outs = {o.get("name"): o for o in data["outputs"] if isinstance(o, dict)}
    missing = [n for n in wanted if n not in outs]
    if missing:
        raise DeployError(f"{path}: outputs lack {missing} ({what})")
    return outs


def _validate_bmn(data: dict, seg: dict, path: str) -> None:
    num_classes = seg["recognizer"]["num_classes"]
    if len(data["labels"]) < num_classes:
        raise DeployError(f"{path}: labels has {len(data['labels'])} names but the recognizer has {num_classes} "
                          "classes")
    for key in ("dscale", "top_k"):
        _int(seg.get(key), f"{SECTION}.{key}", path)
    nms = seg.get("soft_nms")
    if not isinstance(nms, dict) or any(k not in nms for k in SOFT_NMS_KEYS):
        raise DeployError(f"{path}: {SECTION}.soft_nms must have {list(SOFT_NMS_KEYS)}, got {nms!r}")
    for key in SOFT_NMS_KEYS[:3]:
        _number(nms[key], f"{SECTION}.soft_nms.{key}", path)
    _int(nms["top_k"], f"{SECTION}.soft_nms.top_k", path)
    if _number(nms["alpha"], f"{SECTION}.soft_nms.alpha", path) <= 0:
        raise DeployError(f"{path}: {SECTION}.soft_nms.alpha must be positive, got {nms['alpha']!r}")
    _outputs(data, ("confidence", "start", "end"), path, "a BMN gives confidence, start and end")


def _validate_ctcn(data: dict, seg: dict, path: str) -> None:
    num_classes = _int(seg.get("num_classes"), f"{SECTION}.num_classes", path)
    num_anchors = _int(seg.get("num_anchors"), f"{SECTION}.num_anchors", path)
    if len(data["labels"]) < num_classes:
        raise DeployError(f"{path}: labels has {len(data['labels'])} names but the C-TCN has {num_classes} classes")
    if not isinstance(seg.get("anchors"), str) or not seg["anchors"].endswith(".npy"):
        raise DeployError(f"{path}: {SECTION}.anchors must name the anchors' .npy file, got {seg.get('anchors')!r}")
    dec = seg.get("decode")
    if not isinstance(dec, dict) or any(k not in dec for k in ("variances", *DECODE_KEYS)):
        raise DeployError(f"{path}: {SECTION}.decode must have {['variances', *DECODE_KEYS]}, got {dec!r}")
    var = dec["variances"]
    if not isinstance(var, list) or len(var) != 2 or any(_number(v, f"{SECTION}.decode.variances", path) <= 0
                                                          for v in var):
        raise DeployError(f"{path}: {SECTION}.decode.variances must be two positive numbers, got {var!r}")
    for key in DECODE_KEYS:
        if key in CTCN_INT_KEYS:
            _int(dec[key], f"{SECTION}.decode.{key}", path)
        else:
            _number(dec[key], f"{SECTION}.decode.{key}", path)
    if _number(dec["soft_sigma"], f"{SECTION}.decode.soft_sigma", path) <= 0:
        raise DeployError(f"{path}: {SECTION}.decode.soft_sigma must be positive, got {dec['soft_sigma']!r}")
    outs = _outputs(data, ("offsets", "probs"), path, "a C-TCN gives offsets and probs")
    for name, last in (("offsets", 2), ("probs", num_classes + 1)):
        shape = outs[name].get("shape")
        if not isinstance(shape, list) or len(shape) != 3 or list(shape[1:]) != [num_anchors, last]:
            raise DeployError(f"{path}: outputs.{name}.shape must be [B, num_anchors={num_anchors}, {last}], got "
                              f"{shape!r}")
