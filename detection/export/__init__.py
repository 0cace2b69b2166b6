"""Detection's export hook: what to trace for YOLOv3 and what its outputs mean (the core does the rest).

``cfg.export.postprocess: true`` (default): the graph is decode + per-class NMS (ONNX ``NonMaxSuppression``)
+ a fixed-size top-M, outputs ``num_dets, boxes, scores, labels`` with fixed shapes (batch may be dynamic).
``postprocess: false``: the graph stops after decoding (``boxes, scores``) and the predictor runs the NMS.
The ONNX export needs :data:`ONNX_TRANSLATIONS` as ``custom_translation_table`` (given to the spec, which the
core passes to ``torch.onnx.export``); see :mod:`detection.export.nms_op`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from oars.config import ConfigError
from oars.export.errors import ExportCheckError
from oars.export.spec import ExportOptions, ExportSpec

from .compare import MatchResult, MatchSettings, compare_detections, detection_agreement, pad_detections
from .module import LABEL_PAD, YOLOv3Decode, YOLOv3WithNMS
from .nms_op import ONNX_TRANSLATIONS

__all__ = [
    "LABEL_PAD", "ONNX_TRANSLATIONS", "DetectionCompare", "MatchResult", "MatchSettings", "YOLOv3Decode",
    "YOLOv3WithNMS", "build_export_spec", "compare_detections", "detection_agreement", "pad_detections",
]  # fmt: skip

OUTPUT_META = {
    "num_dets": ("int64", "detections per image; rows >= num_dets are padding"),
    "boxes": ("float32", "x1, y1, x2, y2 in input pixels (divide by scale_factor, clip to the original image)"),
    "scores": ("float32", "score = objectness * class probability, decreasing; 0 in padding rows"),
    "labels": ("int64", f"class index; {LABEL_PAD} in padding rows"),
}


class DetectionCompare:
    """The spec's ``compare``: detections matched as sets (:func:`compare_detections`), never element-wise.

    ``compare(expected, actual, image=None)`` with the outputs by name (PyTorch, ONNX Runtime) returns the
    per-output differences the core checks against its tolerance (matched pairs' max score and box differences;
    0 for num_dets and labels, which the set match checks exactly), or raises :class:`ExportCheckError` naming
    the first unmatched detections.
    """

    def __init__(self, settings: MatchSettings) -> None:
        self.settings = settings

    def __call__(self, expected: Mapping, actual: Mapping, image: Any = None) -> dict[str, float]:
        result = compare_detections(expected, actual, self.settings)
        if not result.ok:
            raise ExportCheckError(f"ONNX Runtime vs PyTorch: {result.message}")
        return {"num_dets": 0.0, "boxes": result.max_box_diff, "scores": result.max_score_diff, "labels": 0.0}


def _option(options: ExportOptions, cfg: Any) -> bool:
    value = options.extra.get("postprocess", True)
    if not isinstance(value, bool):
        where = getattr(cfg, "filename", None) or "config"
        raise ConfigError(f"{where}: export.postprocess must be true or false, got {value!r}")
    return value


def _check_model(model: nn.Module, options: ExportOptions, cfg: Any) -> tuple[int, int]:
    where = getattr(cfg, "filename", None) or "config"
    head = getattr(model, "bbox_head", None)
    if head is None or not all(hasattr(head, a) for a in ("_decode_flat", "test_cfg", "num_classes")):
        raise ConfigError(
            f"{where}: detection export supports single-stage detectors with a YOLOv3-style head "
            f"(bbox_head with decode and test_cfg); got {type(model).__name__} with head {type(head).__name__}"
        )
    shape = tuple(options.input_shape)
    stride = max(int(s) for s in getattr(head, "strides", [32]))
    if len(shape) != 4 or shape[1] != 3 or shape[2] % stride or shape[3] % stride or min(shape) < 1:
        raise ConfigError(
            f"{where}: export.input_shape={list(shape)} must be [B, 3, H, W] with H and W multiples of the "
            f"largest stride {stride} (what the data preprocessor pads to)"
        )
    return shape[2], shape[3]


def build_export_spec(model: nn.Module, cfg: Any, options: ExportOptions) -> ExportSpec:
    """The YOLOv3 graph to export (see the module docstring) with its outputs and post-processing described."""
    in_graph_nms = _option(options, cfg)
    h, w = _check_model(model, options, cfg)
    model = model.eval()
    head = model.bbox_head
    test_cfg = head.test_cfg
    decode = YOLOv3Decode(model).eval()
    with torch.no_grad():
        param = next(model.parameters(), None)
        probe = torch.zeros(1, 3, h, w, device=param.device if param is not None else "cpu")
        num_priors = int(decode(probe)[0].shape[1])
    batch = -1 if options.dynamic else int(options.input_shape[0])
    thresholds = dict(
        score_thr=float(test_cfg["score_thr"]),
        conf_thr=float(test_cfg["conf_thr"]),
        iou_threshold=float(test_cfg["nms"]["iou_threshold"]),
    )
    if in_graph_nms:
        module = YOLOv3WithNMS(model, num_priors).eval()
        m = module.max_per_img
        shapes = {"num_dets": [batch], "boxes": [batch, m, 4], "scores": [batch, m], "labels": [batch, m]}
        outputs = [
            dict(name=n, shape=shapes[n], dtype=OUTPUT_META[n][0], meaning=OUTPUT_META[n][1]) for n in OUTPUT_META
        ]
        postprocess = dict(
            type="detection",
            num_classes=int(head.num_classes),  # predictors check that labels names them all
            inside_graph=["decode", "nms"],
            **thresholds,
            max_per_img=m,
            nms_pre=int(test_cfg["nms_pre"] or 0),
            boxes_in="input_pixels",
            label_pad=LABEL_PAD,
        )
        settings = MatchSettings(
            score_thr=thresholds["score_thr"], iou_threshold=thresholds["iou_threshold"], label_pad=LABEL_PAD
        )
        spec = ExportSpec(
            module=module,
            input_name="image",
            output_names=list(OUTPUT_META),
            outputs=outputs,
            postprocess=postprocess,
            atol=1e-4,
            compare=DetectionCompare(settings),
            agreement=detection_agreement,
            custom_translation_table=dict(ONNX_TRANSLATIONS),  # oars::nms -> ONNX NonMaxSuppression
        )
    else:
        c = int(head.num_classes)
        outputs = [
            dict(
                name="boxes",
                shape=[batch, num_priors, 4],
                dtype="float32",
                meaning="x1, y1, x2, y2 per prior in input pixels, clipped to the input",
            ),
            dict(
                name="scores",
                shape=[batch, num_priors, c],
                dtype="float32",
                meaning="objectness * class probability per prior and class; 0 where objectness <= conf_thr",
            ),
        ]
        postprocess = dict(
            type="detection",
            num_classes=c,
            inside_graph=["decode"],
            **thresholds,
            max_per_img=int(test_cfg["max_per_img"] or 0),
            nms_pre=int(test_cfg["nms_pre"] or 0),
            boxes_in="input_pixels",
        )
        spec = ExportSpec(
            module=decode,
            input_name="image",
            output_names=["boxes", "scores"],
            outputs=outputs,
            postprocess=postprocess,
        )
    return spec
