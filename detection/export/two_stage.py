"""The exported graph of two-stage detectors (Faster / Mask / Cascade R-CNN): the eager inference's own blocks
with ``static=True``.

There is one implementation of two-stage inference: :meth:`RPNHead.proposals_padded` and the RoI head's
``predict_padded`` (:mod:`detection.models.roi_heads.two_stage_infer`), whose shapes depend on the input size
only (the batch may be dynamic). ``model.predict`` runs them eagerly; this module runs them on the exported input
size with ``static=True`` (RoI pooling as per-level ONNX ``RoiAlign`` selected by ``where``, masks of every row),
and ``torch.onnx.export`` turns the two custom ops into ONNX ``NonMaxSuppression`` / ``RoiAlign``
(:mod:`detection.export.nms_op`).

Outputs: ``num_dets [B]`` int64, ``boxes [B, M, 4]`` (input pixels), ``scores [B, M]``, ``labels [B, M]`` int64
(``LABEL_PAD`` in padding rows) [, ``masks [B, M, Hm, Wm]`` probabilities, pasted into the original image by
the predictor (``oars_deploy.mask_paste``, the paste the eager model uses)], rows by decreasing score.
The one difference from ``model.predict``: boxes are clipped to the input, not to each image's un-padded
``img_shape`` (the graph has one input; a letterboxed image's boxes may reach into the padding, where the
predictor clips them to the original image).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from detection.models.heads.dense_utils import refuse_soft_nms_in_graph
from detection.models.roi_heads.two_stage_infer import check_static_extractor

from . import nms_op  # noqa: F401  (the ONNX translations of torch.ops.oars.nms and torch.ops.oars.roi_align)


def _as_list(x: object) -> list:
    return list(x) if isinstance(x, (list, tuple, nn.ModuleList)) else [x]


class TwoStageExport(nn.Module):
    """image ``[B, 3, H, W]`` -> ``(num_dets, boxes, scores, labels[, masks])`` (see the module docstring).

    Args:
        detector: a ``TwoStageDetector`` (``FasterRCNN``, ``MaskRCNN``, ``CascadeRCNN``) in eval mode, with
            RoIAlign extractors and hard NMS (ValueError otherwise: ``test_cfg.rcnn.nms.type: soft_nms`` has no
            ONNX form).
        input_hw: the exported input's (H, W).
        counting: the module is built to count operations only (``tools/get_flops.py``), never exported: a
            ``soft_nms`` config then runs hard NMS at its IoU threshold, a graph of the same shapes (the detector's
            ``roi_head.test_cfg`` is replaced: the counted model is built for the count alone).
    """

    def __init__(self, detector: nn.Module, input_hw: tuple[int, int], counting: bool = False) -> None:
        super().__init__()
        self.detector = detector
        self.rpn_head = detector.rpn_head
        self.roi_head = roi = detector.roi_head
        self.input_hw = (int(input_hw[0]), int(input_hw[1]))
        self.num_classes = int(roi.num_classes)
        self.with_masks = bool(roi.with_mask)
        for extractor, _, _ in roi.box_stages() + (roi.mask_stages() if self.with_masks else []):
            check_static_extractor(extractor)
        if self.with_masks:
            self.mask_heads = [head for _, _, head in roi.mask_stages()]
            self.mask_size = int(self.mask_heads[-1].mask_size)
        cfg = roi.test_cfg
        if counting and cfg["nms"].get("type") == "soft_nms":  # costed as hard NMS: the counted model's own cfg
            roi.test_cfg = cfg = {**cfg, "nms": {"type": "nms", "iou_threshold": float(cfg["nms"]["iou_threshold"])}}
        refuse_soft_nms_in_graph(cfg["nms"], "model.test_cfg.rcnn.nms")  # the graph holds the NMS
        self.score_thr = float(cfg["score_thr"])
        self.iou_threshold = float(cfg["nms"]["iou_threshold"])
        self.nms_pre = int(cfg["nms_pre"] or 0)
        self.mask_thr_binary = float(cfg["mask_thr_binary"]) if self.with_masks else None
        self.num_proposals = self._count_proposals()
        max_per_img = int(cfg["max_per_img"])
        self.max_per_img = max_per_img if max_per_img > 0 else self.num_proposals * self.num_classes

    def _proposals(self, feats: list[Tensor], hw: Tensor) -> tuple[Tensor, Tensor]:
        cls_scores, bbox_preds = self.rpn_head(feats)
        boxes, _, valid = self.rpn_head.proposals_padded(cls_scores, bbox_preds, hw, self.input_hw)
        return boxes, valid

    def _input_hw(self, device: torch.device) -> Tensor:
        return torch.tensor([[float(self.input_hw[0]), float(self.input_hw[1])]], device=device)

    def _count_proposals(self) -> int:
        """``K``: the proposals per image the RPN yields at this input size (one probe forward)."""
        param = next(self.detector.parameters(), None)
        device = param.device if param is not None else torch.device("cpu")
        with torch.no_grad():
            feats = self.detector.extract_feat(torch.zeros(1, 3, *self.input_hw, device=device))
            boxes, _ = self._proposals(feats, self._input_hw(device))
        return int(boxes.shape[1])

    def forward(self, image: Tensor) -> tuple[Tensor, ...]:
        feats = self.detector.extract_feat(image)
        hw = self._input_hw(image.device)
        proposals, valid = self._proposals(feats, hw)  # [B, K, 4], [B, K]
        return self.roi_head.predict_padded(feats, proposals, valid, hw, static=True)
