"""Detection's export hook: what to trace for a detector and what its outputs mean (the core does the rest).

Single-stage detectors (YOLOv3, RetinaNet, FCOS, SSD: any whose ``bbox_head`` has ``export_decode``, the seam
described in :mod:`detection.export.module`) export through :class:`DenseDecode` / :class:`DenseWithNMS`.

``cfg.export.postprocess: true`` (default): the graph is decode + per-class NMS (ONNX ``NonMaxSuppression``)
+ a fixed-size top-M, outputs ``num_dets, boxes, scores, labels`` with fixed shapes (batch may be dynamic).
``postprocess: false``: the graph stops after decoding (``boxes, scores``) and the predictor runs the NMS
(``postprocess.nms`` in deploy.yaml carries a ``test_cfg.nms`` of ``type: soft_nms``; with the NMS inside the
graph, soft-NMS is refused: ONNX has no soft form).
``postprocess: raw``: the graph ends at the head's per-level raw maps (convolutions and elementwise ops only, so
ncnn holds it) and deploy.yaml's ``postprocess.decode`` drives the runtime's NumPy decoder before its NMS
(:mod:`detection.export.raw`).
Two-stage detectors (Faster / Mask / Cascade R-CNN; :mod:`detection.export.two_stage`): always the whole
graph (RPN + its NMS, RoI heads, per-class NMS; soft-NMS is refused), the same four outputs plus
``masks [B, M, h, w]`` (mask probabilities in the detections' boxes) for mask models, which the predictors
paste into the image.
The ONNX export needs :data:`ONNX_TRANSLATIONS` as ``custom_translation_table`` (given to the spec, which the
core passes to ``torch.onnx.export``); see :mod:`detection.export.nms_op`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from detection.models.heads.dense_utils import refuse_soft_nms_in_graph
from oars.config import ConfigError
from oars.export.errors import ExportCheckError
from oars.export.spec import ExportOptions, ExportSpec

from .compare import (
    MaskMatch,
    MatchResult,
    MatchSettings,
    compare_detections,
    compare_masks,
    detection_agreement,
    pad_detections,
)
from .module import (
    LABEL_PAD,
    DenseDecode,
    DenseNMSSettings,
    DenseWithNMS,
    YOLOv3Decode,
    YOLOv3WithNMS,
    dense_nms_settings,
)
from .nms_op import ONNX_TRANSLATIONS, ROI_ALIGN_MIN_OPSET
from .raw import RawHeadMaps, RawLayout, raw_layout
from .two_stage import TwoStageExport

__all__ = [
    "LABEL_PAD", "ONNX_TRANSLATIONS", "DenseDecode", "DenseNMSSettings", "DenseWithNMS", "DetectionCompare",
    "MaskMatch", "MatchResult", "MatchSettings", "RawHeadMaps", "RawLayout", "TwoStageExport", "YOLOv3Decode",
    "YOLOv3WithNMS",
    "build_export_spec", "compare_detections", "compare_masks", "dense_nms_settings", "detection_agreement",
    "pad_detections", "raw_layout",
]  # fmt: skip

OUTPUT_META = {
    "num_dets": ("int64", "detections per image; rows >= num_dets are padding"),
    "boxes": ("float32", "x1, y1, x2, y2 in input pixels (divide by scale_factor, clip to the original image)"),
    "scores": ("float32", "score = objectness * class probability, decreasing; 0 in padding rows"),
    "labels": ("int64", f"class index; {LABEL_PAD} in padding rows"),
}
MASKS_META = ("float32", "mask probability of the detection's class on an Hm x Wm grid laid over its box (paste: "
              "bilinear over the box in the original image, >= mask_thr_binary); 0 in padding rows")
RAW = "raw"  # export.postprocess: raw (the head's maps; see detection.export.raw)
MASK_ATOL = 1e-3  # self-check: mask probabilities of matched detections (boxes may differ by float noise)
MIN_MASK_IOU = 0.98  # self-check: binary (>= mask_thr_binary) masks of matched detections


class DetectionCompare:
    """The spec's ``compare``: detections matched as sets (:func:`compare_detections`), never element-wise.

    ``compare(expected, actual, image=None)`` with the outputs by name (PyTorch, ONNX Runtime) returns the
    per-output differences the core checks against its tolerance (matched pairs' max score and box differences;
    0 for num_dets and labels, which the set match checks exactly), or raises :class:`ExportCheckError` naming
    the first unmatched detections.

    With ``mask_threshold`` (mask models) the ``masks`` of matched pairs are compared too
    (:func:`compare_masks`): their max abs probability difference is returned, and binary masks that overlap
    less than ``min_mask_iou`` raise :class:`ExportCheckError`.
    """

    def __init__(self, settings: MatchSettings, mask_threshold: float | None = None,
                 min_mask_iou: float = MIN_MASK_IOU) -> None:
        self.settings = settings
        self.mask_threshold = mask_threshold
        self.min_mask_iou = min_mask_iou

    def __call__(self, expected: Mapping, actual: Mapping, image: Any = None) -> dict[str, float]:
        result = compare_detections(expected, actual, self.settings)
        if not result.ok:
            raise ExportCheckError(f"ONNX Runtime vs PyTorch: {result.message}")
        diffs = {"num_dets": 0.0, "boxes": result.max_box_diff, "scores": result.max_score_diff, "labels": 0.0}
        if self.mask_threshold is not None:
            masks = compare_masks(expected["masks"], actual["masks"], result.pairs, self.mask_threshold)
            if masks.min_iou < self.min_mask_iou:
                raise ExportCheckError(f"ONNX Runtime vs PyTorch: the binary masks of matched detections overlap "
                                       f"with IoU {masks.min_iou:.4f} (at least {self.min_mask_iou} expected; "
                                       f"{masks.count} pairs, max probability difference {masks.max_abs_diff:.3g})")
            diffs["masks"] = masks.max_abs_diff
        return diffs


def _option(options: ExportOptions, cfg: Any) -> bool | str:
    """``export.postprocess``: True (decode + NMS in the graph), False (decode in the graph) or ``"raw"`` (the
    head's maps; the runtime decodes, :mod:`detection.export.raw`)."""
    value = options.extra.get("postprocess", True)
    if not (isinstance(value, bool) or value == RAW):
        where = getattr(cfg, "filename", None) or "config"
        raise ConfigError(f"{where}: export.postprocess must be true, false or raw (the head's raw maps, decoded by "
                          f"the runtime: what --format ncnn needs), got {value!r}")
    return value


def _check_model(model: nn.Module, options: ExportOptions, cfg: Any) -> tuple[int, int]:
    where = getattr(cfg, "filename", None) or "config"
    head = getattr(model, "bbox_head", None)
    if head is None or not callable(getattr(head, "export_decode", None)) or not all(
        hasattr(head, a) for a in ("test_cfg", "num_classes")
    ):
        raise ConfigError(
            f"{where}: detection export supports single-stage detectors whose bbox_head has export_decode "
            f"(YOLOv3, RetinaNet, FCOS, SSD) and two-stage R-CNNs; got {type(model).__name__} with head "
            f"{type(head).__name__}"
        )
    shape = tuple(options.input_shape)
    if getattr(head, "export_any_size", False) or not hasattr(head, "strides"):
        # priors tile any feature-map size (RetinaNet, FCOS; SSD's priors are per input): the input is what the
        # data preprocessor pads to
        divisor = int(getattr(getattr(model, "data_preprocessor", None), "size_divisor", None) or 1)
        what = f"the data preprocessor's pad_size_divisor {divisor}"
    else:
        divisor = max(int(s) for s in getattr(head, "strides", [32]))
        what = f"the largest stride {divisor} (what the data preprocessor pads to)"
    if len(shape) != 4 or shape[1] != 3 or min(shape) < 1 or shape[2] % divisor or shape[3] % divisor:
        raise ConfigError(f"{where}: export.input_shape={list(shape)} must be [B, 3, H, W] with H and W multiples "
                          f"of {what}")
    return shape[2], shape[3]


def _is_two_stage(model: nn.Module) -> bool:
    return hasattr(model, "rpn_head") and hasattr(model, "roi_head")


def _two_stage_spec(model: nn.Module, cfg: Any, options: ExportOptions) -> ExportSpec:
    """Faster / Mask / Cascade R-CNN: :class:`TwoStageExport` with its outputs described."""
    where = getattr(cfg, "filename", None) or "config"
    mode = _option(options, cfg)
    if mode is not True:
        raise ConfigError(f"{where}: export.postprocess: {str(mode).lower()} is not available for two-stage detectors "
                          "(their RoI head needs the RPN's NMS inside the graph); set export.postprocess: true")
    if options.opset < ROI_ALIGN_MIN_OPSET:
        raise ConfigError(f"{where}: two-stage export needs ONNX opset >= {ROI_ALIGN_MIN_OPSET} (RoiAlign with "
                          f"coordinate_transformation_mode), got --opset {options.opset}")
    shape = tuple(options.input_shape)
    divisor = int(getattr(getattr(model, "data_preprocessor", None), "size_divisor", None) or 1)
    if len(shape) != 4 or shape[1] != 3 or min(shape) < 1 or shape[2] % divisor or shape[3] % divisor:
        raise ConfigError(f"{where}: export.input_shape={list(shape)} must be [B, 3, H, W] with H and W multiples "
                          f"of the data preprocessor's pad_size_divisor {divisor}")
    try:
        module = TwoStageExport(model.eval(), (shape[2], shape[3]), counting=options.counting).eval()
    except ValueError as err:
        raise ConfigError(f"{where}: {err}") from None
    batch = -1 if options.dynamic else int(shape[0])
    m = module.max_per_img
    names = list(OUTPUT_META)
    shapes = {"num_dets": [batch], "boxes": [batch, m, 4], "scores": [batch, m], "labels": [batch, m]}
    outputs = [dict(name=n, shape=shapes[n], dtype=OUTPUT_META[n][0], meaning=OUTPUT_META[n][1]) for n in names]
    rpn_cfg = model.rpn_head.test_cfg
    postprocess = dict(
        type="detection",
        num_classes=module.num_classes,
        inside_graph=["rpn", "roi_head", "nms"],
        score_thr=module.score_thr,
        iou_threshold=module.iou_threshold,
        max_per_img=m,
        nms_pre=module.nms_pre,
        num_proposals=module.num_proposals,
        rpn=dict(nms_pre=int(rpn_cfg["nms_pre"]), max_per_img=int(rpn_cfg["max_per_img"]),
                 iou_threshold=float(rpn_cfg["nms"]["iou_threshold"])),
        boxes_in="input_pixels",
        label_pad=LABEL_PAD,
    )
    output_atol = None
    if module.with_masks:
        size = module.mask_size
        names.append("masks")
        outputs.append(dict(name="masks", shape=[batch, m, size, size], dtype=MASKS_META[0], meaning=MASKS_META[1]))
        postprocess["inside_graph"].append("mask_head")
        # paste: the mask head's rule (FCNMaskHead.paste_mode: mmdet, or torchvision for converted weights)
        postprocess["masks"] = dict(output="masks", size=[size, size], threshold=module.mask_thr_binary,
                                    paste=str(getattr(module.mask_heads[-1], "paste_mode", "mmdet")))
        output_atol = {"masks": MASK_ATOL}
    settings = MatchSettings(score_thr=module.score_thr, iou_threshold=module.iou_threshold, label_pad=LABEL_PAD)
    return ExportSpec(
        module=module,
        input_name="image",
        output_names=names,
        outputs=outputs,
        postprocess=postprocess,
        atol=1e-4,
        output_atol=output_atol,
        compare=DetectionCompare(settings, module.mask_thr_binary if module.with_masks else None),
        agreement=detection_agreement,
        custom_translation_table=dict(ONNX_TRANSLATIONS),  # oars::nms, oars::roi_align -> ONNX ops
        predictor="instance_masks" if module.with_masks else "detection_boxes",
    )


def build_export_spec(model: nn.Module, cfg: Any, options: ExportOptions) -> ExportSpec:
    """The graph to export (see the module docstring) with its outputs and post-processing described: a
    single-stage detector (decode [+ NMS], :func:`_dense_spec`) or a two-stage one (:func:`_two_stage_spec`)."""
    if _is_two_stage(model):
        return _two_stage_spec(model, cfg, options)
    return _dense_spec(model, cfg, options)


def _dense_spec(model: nn.Module, cfg: Any, options: ExportOptions) -> ExportSpec:
    """YOLOv3 / RetinaNet / FCOS / SSD: :class:`DenseWithNMS` (postprocess: true) or :class:`DenseDecode`."""
    mode = _option(options, cfg)
    in_graph_nms = mode is True
    h, w = _check_model(model, options, cfg)
    model = model.eval()
    head = model.bbox_head
    test_cfg = head.test_cfg
    try:
        settings = dense_nms_settings(head)
    except (KeyError, ValueError) as err:
        where = getattr(cfg, "filename", None) or "config"
        raise ConfigError(f"{where}: the head's test_cfg cannot describe the export's NMS: {err}") from None
    nms = test_cfg.get("nms") if isinstance(test_cfg.get("nms"), dict) else {}
    if in_graph_nms and not options.counting:  # counted, a soft-NMS graph is the hard-NMS one (same shapes)
        try:
            refuse_soft_nms_in_graph(nms, "model.test_cfg.nms")
        except ValueError as err:
            where = getattr(cfg, "filename", None) or "config"
            raise ConfigError(f"{where}: {err}") from None
    if mode == RAW:
        return _raw_spec(model, cfg, options, settings, (h, w))
    decode = DenseDecode(model).eval()
    with torch.no_grad():
        param = next(model.parameters(), None)
        probe = torch.zeros(1, 3, h, w, device=param.device if param is not None else "cpu")
        num_priors = int(decode(probe)[0].shape[1])
    batch = -1 if options.dynamic else int(options.input_shape[0])
    thresholds: dict[str, Any] = dict(score_thr=settings.score_thr)
    if "conf_thr" in test_cfg:  # YOLOv3's objectness pre-filter (applied inside export_decode)
        thresholds["conf_thr"] = float(test_cfg["conf_thr"])
    thresholds["iou_threshold"] = settings.iou_threshold
    inside = ["decode", "candidates"] if settings.nms_pre_in_decode else ["decode"]
    if in_graph_nms:
        module = DenseWithNMS(model, num_priors).eval()
        m = module.max_per_img
        shapes = {"num_dets": [batch], "boxes": [batch, m, 4], "scores": [batch, m], "labels": [batch, m]}
        outputs = [
            dict(name=n, shape=shapes[n], dtype=OUTPUT_META[n][0], meaning=OUTPUT_META[n][1]) for n in OUTPUT_META
        ]
        if getattr(head, "export_score_meaning", None):  # not YOLOv3's objectness * class probability
            what = str(head.export_score_meaning).split(";")[0]
            outputs[2]["meaning"] = f"score = {what}, decreasing; 0 in padding rows"
        postprocess = dict(
            type="detection",
            num_classes=int(head.num_classes),  # predictors check that labels names them all
            inside_graph=[*inside, "nms"],
            **thresholds,
            max_per_img=m,
            nms_pre=int(test_cfg.get("nms_pre") or 0),
            boxes_in="input_pixels",
            label_pad=LABEL_PAD,
        )
        match = MatchSettings(score_thr=settings.score_thr, iou_threshold=settings.iou_threshold, label_pad=LABEL_PAD)
        return ExportSpec(
            module=module,
            input_name="image",
            output_names=list(OUTPUT_META),
            outputs=outputs,
            postprocess=postprocess,
            atol=1e-4,
            compare=DetectionCompare(match),
            agreement=detection_agreement,
            custom_translation_table=dict(ONNX_TRANSLATIONS),  # oars::nms -> ONNX NonMaxSuppression
            predictor="detection_boxes",
        )
    c = int(head.num_classes)
    meaning = getattr(head, "export_score_meaning", None) or (
        "objectness * class probability per prior and class; 0 where objectness <= conf_thr"
    )
    outputs = [
        dict(
            name="boxes",
            shape=[batch, num_priors, 4],
            dtype="float32",
            meaning="x1, y1, x2, y2 per prior in input pixels, clipped to the input",
        ),
        dict(name="scores", shape=[batch, num_priors, c], dtype="float32", meaning=meaning),
    ]
    postprocess = dict(
        type="detection",
        num_classes=c,
        inside_graph=inside,
        **thresholds,
        max_per_img=int(test_cfg.get("max_per_img") or 0),
        # the predictor's global top-k before NMS; 0 when export_decode already selected per level
        nms_pre=settings.nms_pre,
        boxes_in="input_pixels",
    )
    if nms.get("type") == "soft_nms":  # the predictor runs the soft-NMS on the raw outputs
        postprocess["nms"] = {k: nms[k] for k in ("type", "method", "sigma", "iou_threshold", "min_score")}
    return ExportSpec(
        module=decode,
        input_name="image",
        output_names=["boxes", "scores"],
        outputs=outputs,
        postprocess=postprocess,
        predictor="detection_boxes",
    )


def _raw_spec(model: nn.Module, cfg: Any, options: ExportOptions, settings: DenseNMSSettings,
              hw: tuple[int, int]) -> ExportSpec:
    """``export.postprocess: raw``: the head's per-level maps (:class:`RawHeadMaps`; convolutions and elementwise
    ops only), with ``postprocess.decode`` for the runtime's NumPy decoder, then its NMS (see
    :mod:`detection.export.raw`)."""
    head = model.bbox_head
    test_cfg = head.test_cfg
    try:
        layout = raw_layout(model, hw)
    except ValueError as err:
        where = getattr(cfg, "filename", None) or "config"
        raise ConfigError(f"{where}: {err}") from None
    module = RawHeadMaps(model, layout).eval()
    batch = -1 if options.dynamic else int(options.input_shape[0])
    with torch.no_grad():
        param = next(model.parameters(), None)
        maps = module(torch.zeros(1, 3, *hw, device=param.device if param is not None else "cpu"))
    outputs = [dict(name=n, shape=[batch, *(int(v) for v in m.shape[1:])], dtype="float32", meaning=layout.meanings[n])
               for n, m in zip(layout.names, maps)]
    postprocess: dict[str, Any] = dict(type="detection", num_classes=int(head.num_classes), inside_graph=[],
                                       score_thr=settings.score_thr)
    if "conf_thr" in test_cfg:  # YOLOv3's objectness pre-filter (the decoder applies it)
        postprocess["conf_thr"] = float(test_cfg["conf_thr"])
    postprocess.update(iou_threshold=settings.iou_threshold, max_per_img=settings.max_per_img,
                       nms_pre=settings.nms_pre,  # the NMS's global top-k; 0 when the decoder selects per level
                       boxes_in="input_pixels", decode=layout.decode)
    nms = test_cfg.get("nms") if isinstance(test_cfg.get("nms"), dict) else {}
    if nms.get("type") == "soft_nms":  # the predictor runs the soft-NMS after decoding
        postprocess["nms"] = {k: nms[k] for k in ("type", "method", "sigma", "iou_threshold", "min_score")}
    return ExportSpec(module=module, input_name="image", output_names=list(layout.names), outputs=outputs,
                      postprocess=postprocess, predictor="detection_boxes")
