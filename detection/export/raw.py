"""``export.postprocess: raw``: one-stage detectors exported up to their heads' raw maps, decoded by the runtime.

Why: formats such as ncnn hold convolutions and elementwise ops but not the decode graph's TopK, comparisons and
NMS. The raw graph (:class:`RawHeadMaps`) ends at the head's per-level outputs (class logits, box regressions,
FCOS centerness, YOLOv3's maps with objectness), and deploy.yaml's ``postprocess.decode`` (:func:`raw_layout`)
tells the runtime's NumPy decoder (``oars_deploy.predictors.detection_boxes.decode``) how to make the boxes and
candidate scores that ``export_decode`` makes in the graph: the priors as a grid of base anchors per level
(checked here against the head's own priors), the box coder, the score activation and the candidate selection.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from detection.models.heads import FCOSHead, RetinaHead, SSDHead, YOLOv3Head
from detection.models.heads.yolov3_head import MAX_LOG_WH
from oars_deploy.predictors.detection_boxes.decode import grid_priors

PRIOR_ATOL = 1e-3  # px: the runtime's grid of base anchors vs the head's own priors
RAW_HEADS = "YOLOv3Head, RetinaHead, FCOSHead and SSDHead"


@dataclass
class RawLayout:
    """The raw graph's outputs (``names``, in order), how a head's ``forward`` output is listed in that order
    (``flatten``) and deploy.yaml's ``postprocess.decode`` (``decode``)."""

    names: list[str]
    flatten: Callable[[Any], list[Tensor]]
    decode: dict
    meanings: dict[str, str]


class RawHeadMaps(nn.Module):
    """image [B, 3, H, W] -> the head's per-level maps ``[B, A * K, H_l, W_l]`` in :class:`RawLayout` order."""

    def __init__(self, detector: nn.Module, layout: RawLayout) -> None:
        super().__init__()
        self.detector = detector
        self.head = detector.bbox_head
        self.layout = layout

    def forward(self, image: Tensor) -> tuple[Tensor, ...]:
        return tuple(m.float() for m in self.layout.flatten(self.head(self.detector.extract_feat(image))))


def _field(names: Sequence[str], channels: int, start: int = 0, count: int | None = None) -> dict:
    return dict(outputs=list(names), channels=int(channels), start=int(start),
                count=int(channels if count is None else count))


def _levels(bases: Sequence[Tensor], strides: Sequence[tuple[float, float]]) -> list[dict]:
    return [dict(stride=[float(sx), float(sy)], base_anchors=np.asarray(b, dtype=np.float32).tolist())
            for b, (sx, sy) in zip(bases, strides)]


def _delta_coder(coder: Any) -> dict:
    """The box coder of RetinaNet / SSD in deploy.yaml's terms (MMDetection's means/stds or torchvision's weights)."""
    kind = type(coder).__name__
    if kind == "TorchvisionBoxCoder":
        return dict(type="delta_xywh", weights=[float(w) for w in coder.weights],
                    clamp=[None, float(coder.bbox_xform_clip)])
    if kind == "DeltaXYWHBBoxCoder":
        return dict(type="delta_xywh", means=[float(m) for m in coder.target_means],
                    stds=[float(s) for s in coder.target_stds], clamp=[-float(coder.max_ratio), float(coder.max_ratio)])
    raise ValueError(f"export.postprocess: raw knows the box coders DeltaXYWHBBoxCoder and TorchvisionBoxCoder, not "
                     f"{kind}")


def _sizes(maps: Sequence[Tensor]) -> list[tuple[int, int]]:
    return [(int(m.shape[-2]), int(m.shape[-1])) for m in maps]


def _yolo(head: YOLOv3Head, raw: Sequence[Tensor], hw: tuple[int, int]) -> tuple[RawLayout, np.ndarray]:
    names = [f"pred_{i}" for i in range(len(raw))]
    k = head.num_attrib
    anchors = head.anchors.detach().float().cpu()
    bases = [torch.cat([-anchors[mask] / 2, anchors[mask] / 2], dim=1) for mask in head.anchor_masks]
    grid, wh, strides = head.priors(_sizes(raw), torch.device("cpu"))
    centre = grid * strides
    expected = torch.cat([centre - wh / 2, centre + wh / 2], dim=1).numpy()
    decode = dict(prior_order="anchor_major", levels=_levels(bases, [(s, s) for s in head.strides]),
                  fields=dict(boxes=_field(names, k, 0, 4), objectness=_field(names, k, 4, 1),
                              scores=_field(names, k, 5, head.num_classes)),
                  box_coder=dict(type="yolo", scale_x_y=float(head.scale_x_y), max_log_wh=float(MAX_LOG_WH)),
                  score=dict(activation="sigmoid", combine="objectness"), candidates={})
    meanings = {n: f"level {i}: per anchor (tx, ty, tw, th, objectness logit, class logits)" for i, n in
                enumerate(names)}
    return RawLayout(names, list, decode, meanings), expected


def _anchor_grid(head: nn.Module, maps: Sequence[Tensor], hw: tuple[int, int]) -> tuple[list[dict], np.ndarray]:
    gen = head.prior_generator
    sizes = _sizes(maps)
    strides = [(float(sw), float(sh)) for sh, sw in gen.level_strides(sizes, hw)]
    expected = torch.cat(gen.grid_priors(sizes, "cpu", torch.float32, image_size=hw)).numpy()
    return _levels([b.detach().float().cpu() for b in gen.base_anchors], strides), expected


def _retina(head: RetinaHead, raw: Any, hw: tuple[int, int]) -> tuple[RawLayout, np.ndarray]:
    cls, reg = raw
    n = len(cls)
    cls_names, reg_names = [f"cls_{i}" for i in range(n)], [f"reg_{i}" for i in range(n)]
    levels, expected = _anchor_grid(head, cls, hw)
    decode = dict(prior_order="position_major", levels=levels,
                  fields=dict(scores=_field(cls_names, head.num_classes), boxes=_field(reg_names, 4)),
                  box_coder=_delta_coder(head.bbox_coder), score=dict(activation="sigmoid", combine="none"),
                  candidates=dict(per_level_top_k=int(head.test_cfg.get("nms_pre") or 0)))
    meanings = {**{c: f"level {i}: class logits per anchor" for i, c in enumerate(cls_names)},
                **{r: f"level {i}: box deltas per anchor" for i, r in enumerate(reg_names)}}
    return RawLayout(cls_names + reg_names, lambda r: [*r[0], *r[1]], decode, meanings), expected


def _fcos(head: FCOSHead, raw: Any, hw: tuple[int, int]) -> tuple[RawLayout, np.ndarray]:
    logits, _, _ = raw
    n = len(logits)
    cls_names, reg_names, ctr_names = ([f"{p}_{i}" for i in range(n)] for p in ("cls", "reg", "ctr"))
    levels, expected = _anchor_grid(head, logits, hw)
    decode = dict(prior_order="position_major", levels=levels,
                  fields=dict(scores=_field(cls_names, head.num_classes), boxes=_field(reg_names, 4),
                              centerness=_field(ctr_names, 1)),
                  box_coder=dict(type="distance"), score=dict(activation="sigmoid", combine="centerness"),
                  candidates=dict(per_level_top_k=int(head.test_cfg.get("nms_pre") or 0)))
    meanings = {**{c: f"level {i}: class logits per point" for i, c in enumerate(cls_names)},
                **{r: f"level {i}: distances (l, t, r, b) in point sizes" for i, r in enumerate(reg_names)},
                **{c: f"level {i}: centerness logit per point" for i, c in enumerate(ctr_names)}}
    return RawLayout(cls_names + reg_names + ctr_names, lambda r: [*r[0], *r[1], *r[2]], decode, meanings), expected


def _ssd(head: SSDHead, raw: Sequence[Tensor], hw: tuple[int, int]) -> tuple[RawLayout, np.ndarray]:
    n = head.num_levels
    cls_names, reg_names = [f"cls_{i}" for i in range(n)], [f"reg_{i}" for i in range(n)]
    sizes = _sizes(raw[:n])
    expected = head.priors(sizes, hw, torch.device("cpu")).numpy()
    gen = head.prior_generator
    counts = [h * w * a for (h, w), a in zip(sizes, gen.num_base_priors)]
    starts = np.cumsum([0, *counts])
    bases = [torch.from_numpy(expected[s:s + a]) for s, a in zip(starts, gen.num_base_priors)]
    steps = gen.steps
    strides = [(float(steps[k]), float(steps[k])) if steps is not None else (hw[1] / w, hw[0] / h)
               for k, (h, w) in enumerate(sizes)]
    decode = dict(prior_order="position_major", levels=_levels(bases, strides),
                  fields=dict(scores=_field(cls_names, head.num_classes + 1), boxes=_field(reg_names, 4)),
                  box_coder=_delta_coder(head.bbox_coder), score=dict(activation="softmax", combine="none"),
                  candidates=dict(per_class_top_k=int(head.test_cfg.get("topk_candidates") or 0)))
    meanings = {**{c: f"level {i}: class logits per default box (background last)" for i, c in enumerate(cls_names)},
                **{r: f"level {i}: box deltas per default box" for i, r in enumerate(reg_names)}}
    return RawLayout(cls_names + reg_names, list, decode, meanings), expected


def raw_layout(detector: nn.Module, input_hw: tuple[int, int]) -> RawLayout:
    """The raw graph's layout and ``postprocess.decode`` of ``detector`` at the network input ``input_hw``.

    Raises:
        ValueError: a head this mode does not know, or whose priors are not a grid of base anchors (the message
            names it).
    """
    head = detector.bbox_head
    describe = next((f for cls, f in ((YOLOv3Head, _yolo), (RetinaHead, _retina), (FCOSHead, _fcos),
                                      (SSDHead, _ssd)) if isinstance(head, cls)), None)
    if describe is None:
        raise ValueError(f"export.postprocess: raw is available for {RAW_HEADS}, not {type(head).__name__}")
    h, w = int(input_hw[0]), int(input_hw[1])
    with torch.no_grad():
        param = next(detector.parameters(), None)
        probe = torch.zeros(1, 3, h, w, device=param.device if param is not None else "cpu")
        raw = head(detector.extract_feat(probe))
    layout, expected = describe(head, raw, (h, w))
    layout.decode["input_hw"] = [h, w]
    maps = layout.flatten(raw)
    fields = layout.decode["fields"]
    sizes = [(int(m.shape[-2]), int(m.shape[-1])) for m in maps[:len(fields["boxes"]["outputs"])]]
    rebuilt = np.concatenate(grid_priors(layout.decode["levels"], sizes, layout.decode["prior_order"]))
    if rebuilt.shape != expected.shape or not np.allclose(rebuilt, expected, rtol=0, atol=PRIOR_ATOL):
        worst = float(np.abs(rebuilt - expected).max()) if rebuilt.shape == expected.shape else float("inf")
        raise ValueError(f"export.postprocess: raw describes priors as base anchors tiled by stride; "
                         f"{type(head).__name__}'s priors differ from that by {worst:.3g} px (shapes "
                         f"{list(rebuilt.shape)} vs {list(expected.shape)})")
    return layout
