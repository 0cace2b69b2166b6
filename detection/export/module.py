"""The traced graphs of single-stage (dense) detectors: decode (+ candidate selection), optionally NMS and a
fixed-size top-M. Shared by every head that offers ``export_decode`` (YOLOv3, RetinaNet, FCOS, SSD).

The seam (what a dense head provides):

- ``head.export_decode(raw_outputs, image_hw) -> (boxes, scores)``: ``raw_outputs`` is the head's ``forward``
  output (mode ``tensor``), ``image_hw`` the (H, W) of the network input. ``boxes`` is float32 ``[B, N, 4]``
  xyxy in input pixels, clipped to the input; ``scores`` float32 ``[B, N, C]``, 0 where a (prior, class) pair
  is not a candidate. The head's own candidate selection (objectness, score threshold, per-level top-k) is
  applied statically by zeroing, with fixed shapes, so it traces.
- ``head.test_cfg``: ``score_thr``, ``nms: {iou_threshold}`` (or ``iou_threshold``), ``max_per_img`` and
  ``nms_pre``.
- ``nms_pre`` is a global top-k over the image's (prior, class) pairs that :class:`DenseWithNMS` applies after
  ``export_decode`` (YOLOv3, MMDetection's ``multiclass_nms``), unless the head sets the class attribute
  ``nms_pre_in_decode = True``: then ``export_decode`` already applied it (per level, RetinaNet / FCOS as
  torchvision) and nothing more is selected.

After that, per-class NMS (IoU > ``iou_threshold`` suppresses, scores > ``score_thr`` take part) and the
``max_per_img`` best of the image give exactly the head's eager predict on an input of the exported size. The
only step whose size depends on the data is the ONNX ``NonMaxSuppression`` inside (``oars::nms``); its selection
is scattered into a dense [B, C, N] mask, so every output has a fixed shape (batch may be dynamic).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from detection.models.ops import LABEL_PAD  # label of padding rows in the fixed-size outputs

from . import nms_op  # noqa: F401  (the ONNX translation of torch.ops.oars.nms)


@dataclass(frozen=True)
class DenseNMSSettings:
    """What :class:`DenseWithNMS` does after ``export_decode`` (read from the head's ``test_cfg``).

    Attributes:
        score_thr: (prior, class) pairs with score > this take part in NMS.
        iou_threshold: a lower-scored box of the same class is suppressed when IoU > this.
        max_per_img: detections kept per image (0: every (prior, class) pair).
        nms_pre: global top-k over the image's pairs before NMS (0: none, or done in ``export_decode``).
        nms_pre_in_decode: the head's ``export_decode`` applies its own ``nms_pre`` (per level).
    """

    score_thr: float
    iou_threshold: float
    max_per_img: int
    nms_pre: int
    nms_pre_in_decode: bool


def dense_nms_settings(head: nn.Module) -> DenseNMSSettings:
    """:class:`DenseNMSSettings` of a dense head (see the module docstring for the keys it reads)."""
    cfg: dict[str, Any] = dict(head.test_cfg)
    nms = cfg.get("nms") or {}
    iou = nms.get("iou_threshold", cfg.get("iou_threshold")) if isinstance(nms, dict) else cfg.get("iou_threshold")
    if iou is None:
        raise ValueError(f"{type(head).__name__}: test_cfg has no nms.iou_threshold (nor iou_threshold): {cfg}")
    in_decode = bool(getattr(head, "nms_pre_in_decode", False))
    return DenseNMSSettings(
        score_thr=float(cfg["score_thr"]),
        iou_threshold=float(iou),
        max_per_img=int(cfg.get("max_per_img") or 0),
        nms_pre=0 if in_decode else int(cfg.get("nms_pre") or 0),
        nms_pre_in_decode=in_decode,
    )


class DenseDecode(nn.Module):
    """image [B, 3, H, W] -> ``detector.bbox_head.export_decode``'s (boxes [B, N, 4], scores [B, N, C]).

    boxes: float32 xyxy input pixels clipped to the input; scores: float32, 0 where a (prior, class) pair is
    not a candidate of the head's eager predict.
    """

    def __init__(self, detector: nn.Module) -> None:
        super().__init__()
        self.detector = detector
        self.head = detector.bbox_head
        if not callable(getattr(self.head, "export_decode", None)):
            raise ValueError(f"{type(self.head).__name__} has no export_decode(raw_outputs, image_hw)")

    def forward(self, image: Tensor) -> tuple[Tensor, Tensor]:
        raw = self.head(self.detector.extract_feat(image))
        return self.head.export_decode(raw, tuple(image.shape[-2:]))


class DenseWithNMS(nn.Module):
    """image -> (num_dets [B] int64, boxes [B, M, 4] float32, scores [B, M] float32, labels [B, M] int64), padded.

    Padding rows (index >= num_dets) have boxes 0, scores 0 and labels ``LABEL_PAD`` (-1). Rows are sorted by
    decreasing score. ``num_priors`` (N of :class:`DenseDecode` at the exported size) fixes M when
    ``max_per_img`` is 0.
    """

    def __init__(self, detector: nn.Module, num_priors: int) -> None:
        super().__init__()
        self.decode = DenseDecode(detector)
        settings = dense_nms_settings(detector.bbox_head)
        self.settings = settings
        self.num_classes = int(detector.bbox_head.num_classes)
        self.score_thr = settings.score_thr
        self.iou_threshold = settings.iou_threshold
        pairs = num_priors * self.num_classes
        nms_pre = settings.nms_pre
        self.nms_pre = nms_pre if 0 < nms_pre < pairs else 0  # 0: no pre-selection needed
        max_per_img = settings.max_per_img
        self.max_per_img = max_per_img if max_per_img > 0 else (nms_pre if nms_pre > 0 else pairs)
        # After the nms_pre pre-selection no class has more than nms_pre candidates; and no more than max_per_img
        # of one class can reach the output: capping NMS at the smaller never changes the result.
        self.max_per_class = min(nms_pre if nms_pre > 0 else num_priors, self.max_per_img)

    def forward(self, image: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        boxes, scores = self.decode(image)  # [B, N, 4], [B, N, C]
        b, n, c = scores.shape
        if self.nms_pre:
            # Keep the nms_pre best (box, class) pairs of each image, as multiclass_nms's top-k.
            kth = scores.reshape(b, n * c).topk(self.nms_pre, dim=1).values[:, -1]
            scores = torch.where(scores >= kth[:, None, None], scores, torch.zeros_like(scores))
        scores = scores.transpose(1, 2)  # [B, C, N], the layout of ONNX NonMaxSuppression
        selected = torch.ops.oars.nms(boxes, scores, self.max_per_class, self.iou_threshold, self.score_thr)
        kept = torch.zeros_like(scores).index_put(
            (selected[:, 0], selected[:, 1], selected[:, 2]), torch.ones_like(selected[:, 0], dtype=scores.dtype)
        )
        k = min(self.max_per_img, n * c)
        top_scores, top_idx = (scores * kept).reshape(b, c * n).topk(k, dim=1)
        labels = top_idx // n
        det_boxes = boxes.gather(1, (top_idx % n).unsqueeze(-1).expand(-1, -1, 4))
        num_dets = kept.reshape(b, c * n).sum(dim=1).to(torch.int64).clamp(max=k)
        valid = torch.arange(k, device=image.device).unsqueeze(0) < num_dets.unsqueeze(1)
        top_scores = torch.where(valid, top_scores, torch.zeros_like(top_scores))
        labels = torch.where(valid, labels, torch.full_like(labels, LABEL_PAD))
        det_boxes = torch.where(valid.unsqueeze(-1), det_boxes, torch.zeros_like(det_boxes))
        if k < self.max_per_img:  # fewer (box, class) pairs than rows: pad to the promised M
            pad = self.max_per_img - k
            top_scores = F.pad(top_scores, (0, pad))
            labels = F.pad(labels, (0, pad), value=LABEL_PAD)
            det_boxes = F.pad(det_boxes, (0, 0, 0, pad))
        return num_dets, det_boxes, top_scores, labels


# YOLOv3's names from before the seam was shared (YOLOv3Head.export_decode does what YOLOv3Decode did).
YOLOv3Decode = DenseDecode
YOLOv3WithNMS = DenseWithNMS
