"""The traced YOLOv3 graphs: decode (+ clip + objectness filter), optionally NMS and a fixed-size top-M.

Every step reproduces ``YOLOv3Head.predict_by_feat(..., rescale=False)`` on an input of the exported size:
boxes clipped to the input, scores zeroed where objectness <= ``conf_thr``, only the ``nms_pre`` best
(box, class) pairs kept, per-class NMS with ``score_thr``, then the ``max_per_img`` best. The only step whose
size depends on the data is the ONNX ``NonMaxSuppression`` inside (``oars::nms``); its selection is scattered
into a dense [B, C, N] mask, so every output has a fixed shape (batch may be dynamic).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import nms_op  # noqa: F401  (registers torch.ops.oars.nms)

LABEL_PAD = -1  # label of padding rows in the fixed-size outputs


class YOLOv3Decode(nn.Module):
    """image [B, 3, H, W] -> (boxes [B, N, 4] xyxy input pixels clipped to the input, scores [B, N, C]).

    ``scores`` is the head's ``obj * cls`` with rows whose objectness is <= ``conf_thr`` set to 0, as the
    eager predict path does before its score threshold.
    """

    def __init__(self, detector: nn.Module) -> None:
        super().__init__()
        self.detector = detector
        self.head = detector.bbox_head
        self.conf_thr = float(self.head.test_cfg["conf_thr"])

    def forward(self, image: Tensor) -> tuple[Tensor, Tensor]:
        raw = self.head(self.detector.extract_feat(image))
        # _decode_flat keeps objectness apart (decode() multiplies it in) so conf_thr can be applied as eagerly.
        boxes, obj, cls = self.head._decode_flat(raw)
        h, w = image.shape[-2:]
        boxes = torch.stack(
            [
                boxes[..., 0].clamp(0, w),
                boxes[..., 1].clamp(0, h),
                boxes[..., 2].clamp(0, w),
                boxes[..., 3].clamp(0, h),
            ],
            dim=-1,
        )
        scores = torch.where(obj > self.conf_thr, obj * cls, torch.zeros_like(cls))
        return boxes, scores


class YOLOv3WithNMS(nn.Module):
    """image -> (num_dets [B] int64, boxes [B, M, 4], scores [B, M], labels [B, M] int64), padded.

    Padding rows (index >= num_dets) have boxes 0, scores 0 and labels ``LABEL_PAD`` (-1). Rows are sorted
    by decreasing score.
    """

    def __init__(self, detector: nn.Module, num_priors: int) -> None:
        super().__init__()
        self.decode = YOLOv3Decode(detector)
        cfg: dict[str, Any] = detector.bbox_head.test_cfg
        self.num_classes = int(detector.bbox_head.num_classes)
        self.score_thr = float(cfg["score_thr"])
        self.iou_threshold = float(cfg["nms"]["iou_threshold"])
        pairs = num_priors * self.num_classes
        nms_pre = int(cfg["nms_pre"] or 0)
        self.nms_pre = nms_pre if 0 < nms_pre < pairs else 0  # 0: no pre-selection needed
        # After the nms_pre pre-selection no class has more than nms_pre candidates: NMS never truncates.
        self.max_per_class = nms_pre if nms_pre > 0 else num_priors
        max_per_img = int(cfg["max_per_img"] or 0)
        self.max_per_img = max_per_img if max_per_img > 0 else (nms_pre if nms_pre > 0 else pairs)

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
