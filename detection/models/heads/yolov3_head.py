"""YOLOv3's head: per level a 3x3 conv and a 1x1 prediction of (tx, ty, tw, th, obj, classes) per anchor.

Anchors are (w, h) in input pixels (PaddleDetection style); ``anchor_masks[l]`` picks level ``l``'s
anchors, levels ordered as the neck gives them (deepest, stride 32, first). Outputs of all levels are
flattened into one [B, N, 5 + C] tensor (level, anchor, row, column), so targets, losses and decoding
are a handful of batched tensor operations.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from mmengine.structures import InstanceData
from torch import Tensor, nn
from torch.nn.utils.rnn import pad_sequence
from torchvision.ops import clip_boxes_to_image

from detection.registry import MODELS
from oars.errors import DataError
from oars.models.layers import ConvNormAct
from oars.models.utils import labels_out_of_range

from ..losses import bce_with_logits, class_targets, l1_sum, weighted_giou_loss
from ..task_utils import YOLOAssigner, YOLOTargets, ignore_mask, multiclass_nms
from .dense_utils import check_nms_cfg, soft_nms_image

DEFAULT_ANCHORS = [[10, 13], [16, 30], [33, 23], [30, 61], [62, 45], [59, 119], [116, 90], [156, 198], [373, 326]]
DEFAULT_ANCHOR_MASKS = [[6, 7, 8], [3, 4, 5], [0, 1, 2]]
LEAKY = {"type": "LeakyReLU", "negative_slope": 0.1}
TEST_CFG_DEFAULTS: dict[str, Any] = dict(
    score_thr=0.005, conf_thr=0.005, nms=dict(iou_threshold=0.45), max_per_img=100, nms_pre=1000
)
IOU_LOSSES = (None, "giou")
# exp(tw) beyond this would overflow to inf for untrained outputs; e^10 is ~22000x the anchor already.
MAX_LOG_WH = 10.0


def _check_test_cfg(test_cfg: dict[str, Any] | None) -> dict[str, Any]:
    cfg = dict(test_cfg or {})
    unknown = sorted(set(cfg) - set(TEST_CFG_DEFAULTS))
    if unknown:
        raise ValueError(f"YOLOv3Head: unknown test_cfg keys {unknown}; accepted: {sorted(TEST_CFG_DEFAULTS)}")
    nms = dict(cfg.get("nms") or {})
    if nms.get("type", "nms") == "nms":
        nms.setdefault("iou_threshold", TEST_CFG_DEFAULTS["nms"]["iou_threshold"])
    nms = check_nms_cfg("YOLOv3Head", nms)  # plain NMS or soft-NMS, as every detection head
    out = {**TEST_CFG_DEFAULTS, **cfg, "nms": nms}
    for key in ("score_thr", "conf_thr"):
        if not 0 <= float(out[key]) < 1:
            raise ValueError(f"YOLOv3Head: test_cfg.{key} must be in [0, 1), got {out[key]!r}")
    return out


@MODELS.register_module()
class YOLOv3Head(nn.Module):
    """YOLOv3 detection head (Redmon & Farhadi 2018), losses as PaddleDetection's ``YOLOv3Loss``.

    Args:
        num_classes: number of object classes (given by the detector).
        in_channels: channels of the neck's outputs, deepest first (given by the detector).
        anchors: all anchors' (w, h) in input pixels.
        anchor_masks: per level, the indices of its anchors (one list per neck output).
        strides: per level, the stride in input pixels (the detector passes the neck's ``out_strides``).
        ignore_thresh: a negative whose predicted box overlaps a gt (or ignored) box by more IoU than
            this gets no objectness loss.
        label_smooth: class targets ``1 - d`` / ``d`` with ``d = min(1/C, 1/40)``.
        iou_loss: None or ``'giou'`` (an extra GIoU loss on positives, weighted by ``iou_weight``).
        obj_weight, cls_weight, xy_weight, wh_weight, iou_weight: weights of the losses.
        scale_x_y: YOLOv4's grid sensitivity: centre = ``sigmoid(t) * s - (s - 1) / 2`` (1.0: plain YOLOv3).
        norm, act: specs of the 3x3 conv.
        train_cfg: no keys yet (kept for the detector's interface).
        test_cfg: ``score_thr`` (0.005), ``conf_thr`` (objectness pre-filter, 0.005),
            ``nms: {iou_threshold: 0.45}``, ``max_per_img`` (100), ``nms_pre`` (1000).
    """

    def __init__(
        self,
        num_classes: int,
        in_channels: Sequence[int],
        anchors: Sequence[Sequence[float]] = DEFAULT_ANCHORS,
        anchor_masks: Sequence[Sequence[int]] = DEFAULT_ANCHOR_MASKS,
        strides: Sequence[int] = (32, 16, 8),
        ignore_thresh: float = 0.7,
        label_smooth: bool = False,
        iou_loss: str | None = None,
        obj_weight: float = 1.0,
        cls_weight: float = 1.0,
        xy_weight: float = 1.0,
        wh_weight: float = 1.0,
        iou_weight: float = 2.5,
        scale_x_y: float = 1.0,
        norm: Any = "BN",
        act: Any = LEAKY,
        train_cfg: dict[str, Any] | None = None,
        test_cfg: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(num_classes, int) or isinstance(num_classes, bool) or num_classes < 1:
            raise ValueError(f"YOLOv3Head: num_classes must be an int >= 1, got {num_classes!r}")
        in_channels = [in_channels] if isinstance(in_channels, int) else [int(c) for c in in_channels]
        anchors_t = torch.as_tensor(anchors, dtype=torch.float32)
        if anchors_t.dim() != 2 or anchors_t.shape[1] != 2 or len(anchors_t) == 0 or (anchors_t <= 0).any():
            raise ValueError(f"YOLOv3Head: anchors must be a non-empty list of positive [w, h] pairs, got {anchors!r}")
        masks = [[int(i) for i in m] for m in anchor_masks]
        if not (len(masks) == len(strides) == len(in_channels)):
            raise ValueError(
                f"YOLOv3Head: anchor_masks has {len(masks)} levels, strides {list(strides)} has {len(strides)} and "
                f"the neck gives {len(in_channels)} feature maps (in_channels={in_channels}); they must agree"
            )
        for m in masks:
            if not m or any(not 0 <= i < len(anchors_t) for i in m) or len(set(m)) != len(m):
                raise ValueError(
                    f"YOLOv3Head: anchor_masks={masks} is invalid: each level needs distinct indices into the "
                    f"{len(anchors_t)} anchors (0..{len(anchors_t) - 1})"
                )
        if iou_loss not in IOU_LOSSES:
            raise ValueError(f"YOLOv3Head: iou_loss={iou_loss!r} is not supported; accepted: {list(IOU_LOSSES)}")
        if not 0 <= ignore_thresh <= 1:
            raise ValueError(f"YOLOv3Head: ignore_thresh must be in [0, 1], got {ignore_thresh!r}")
        if scale_x_y < 1:
            raise ValueError(f"YOLOv3Head: scale_x_y must be >= 1, got {scale_x_y!r}")
        if train_cfg:
            raise ValueError(
                f"YOLOv3Head: train_cfg takes no keys, got {sorted(train_cfg)}; set ignore_thresh and the loss "
                "weights on the head"
            )
        self.num_classes = num_classes
        self.in_channels = in_channels
        self.anchor_masks = masks
        self.strides = [int(s) for s in strides]
        self.ignore_thresh = float(ignore_thresh)
        self.label_smooth = bool(label_smooth)
        self.iou_loss = iou_loss
        self.weights = dict(obj=obj_weight, cls=cls_weight, xy=xy_weight, wh=wh_weight, iou=iou_weight)
        self.scale_x_y = float(scale_x_y)
        self.train_cfg = dict(train_cfg or {})
        self.test_cfg = _check_test_cfg(test_cfg)
        self.register_buffer("anchors", anchors_t, persistent=False)
        self.assigner = YOLOAssigner(anchors_t, masks, self.strides)
        self._prior_cache: dict[tuple, tuple[Tensor, Tensor, Tensor]] = {}

        self.num_attrib = 5 + num_classes
        self.convs_bridge = nn.ModuleList(ConvNormAct(c, 2 * c, 3, norm=norm, act=act) for c in in_channels)
        self.convs_pred = nn.ModuleList(
            nn.Conv2d(2 * c, len(m) * self.num_attrib, 1) for c, m in zip(in_channels, masks)
        )
        self._init_pred()

    def _init_pred(self) -> None:
        """Small prediction weights; objectness bias at the prior of ~8 objects per 640x640 image
        (as ultralytics), so the first iterations are not dominated by thousands of confident negatives."""
        for conv, mask, stride in zip(self.convs_pred, self.anchor_masks, self.strides):
            nn.init.normal_(conv.weight, std=0.01)
            bias = conv.bias.data.view(len(mask), self.num_attrib)
            bias.zero_()
            bias[:, 4] = math.log(8 / (640 / stride) ** 2)

    # ----------------------------------------------------------------- forward and decoding
    def forward(self, feats: Sequence[Tensor]) -> tuple[Tensor, ...]:
        """Neck maps (deepest first) -> per level [B, A * (5 + C), H, W]."""
        if len(feats) != len(self.convs_pred):
            raise ValueError(
                f"YOLOv3Head: got {len(feats)} feature maps, built for {len(self.convs_pred)} levels "
                f"(anchor_masks={self.anchor_masks})"
            )
        return tuple(pred(bridge(x)) for x, bridge, pred in zip(feats, self.convs_bridge, self.convs_pred))

    def flatten_outputs(self, raw_outputs: Sequence[Tensor]) -> Tensor:
        """Per-level outputs -> [B, N, 5 + C], priors ordered level, anchor, row, column."""
        flat = []
        for raw, mask in zip(raw_outputs, self.anchor_masks):
            b, _, h, w = raw.shape
            per_anchor = raw.view(b, len(mask), self.num_attrib, h, w).permute(0, 1, 3, 4, 2)
            flat.append(per_anchor.reshape(b, -1, self.num_attrib))
        return torch.cat(flat, dim=1)

    def priors(
        self, featmap_sizes: Sequence[tuple[int, int]], device: torch.device, dtype: torch.dtype = torch.float32
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Per prior of one image: cell (x, y) [N, 2], anchor (w, h) [N, 2], stride [N, 1].

        Cached per feature-map sizes; recomputed (traceably) while exporting or compiling.
        """
        symbolic = any(not isinstance(v, int) for size in featmap_sizes for v in size)  # SymInt while exporting
        tracing = symbolic or torch.jit.is_tracing() or torch.onnx.is_in_onnx_export() or torch.compiler.is_compiling()
        key = None if tracing else (tuple(tuple(size) for size in featmap_sizes), str(device), dtype)
        if key is not None and key in self._prior_cache:
            return self._prior_cache[key]
        grids, anchors, strides = [], [], []
        for (h, w), mask, stride in zip(featmap_sizes, self.anchor_masks, self.strides):
            num = len(mask)
            ys, xs = torch.meshgrid(
                torch.arange(h, device=device, dtype=dtype), torch.arange(w, device=device, dtype=dtype), indexing="ij"
            )
            grids.append(torch.stack([xs, ys], dim=-1).reshape(1, -1, 2).expand(num, -1, -1).reshape(-1, 2))
            anc = self.anchors[mask].to(device=device, dtype=dtype)
            anchors.append(anc[:, None, :].expand(num, h * w, 2).reshape(-1, 2))
            strides.append(torch.full((num * h * w, 1), float(stride), device=device, dtype=dtype))
        out = (torch.cat(grids), torch.cat(anchors), torch.cat(strides))
        if key is not None:
            self._prior_cache[key] = out
        return out

    def decode_boxes(self, txywh: Tensor, grid: Tensor, anchors: Tensor, strides: Tensor) -> Tensor:
        """Raw (tx, ty, tw, th) [..., 4] -> xyxy boxes in input pixels (priors broadcast against them)."""
        s = self.scale_x_y
        xy = txywh[..., :2].sigmoid()
        if s != 1.0:
            xy = xy * s - 0.5 * (s - 1.0)
        xy = (xy + grid) * strides
        wh = txywh[..., 2:4].clamp(max=MAX_LOG_WH).exp() * anchors
        return torch.cat([xy - wh / 2, xy + wh / 2], dim=-1)

    def _decode_flat(self, raw_outputs: Sequence[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        # float32 even under fp16 autocast: exp(tw) * anchor overflows half precision.
        flat = self.flatten_outputs(raw_outputs).float()
        sizes = [tuple(r.shape[-2:]) for r in raw_outputs]
        grid, anchors, strides = self.priors(sizes, flat.device, flat.dtype)
        boxes = self.decode_boxes(flat[..., :4], grid, anchors, strides)
        return boxes, flat[..., 4:5].sigmoid(), flat[..., 5:].sigmoid()

    def decode(self, raw_outputs: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
        """Raw outputs -> (boxes [B, N, 4] xyxy in input pixels, scores [B, N, C] = obj * class prob).

        Fixed shapes throughout (no thresholds), so it can sit inside an exported graph.
        """
        boxes, obj, cls = self._decode_flat(raw_outputs)
        return boxes, obj * cls

    def export_decode(self, raw_outputs: Sequence[Tensor], image_hw: Sequence[int]) -> tuple[Tensor, Tensor]:
        """The one-stage export seam (:mod:`detection.export.module`): raw outputs -> (boxes, scores).

        Args:
            raw_outputs: ``forward``'s per-level ``[B, A * (5 + C), H_l, W_l]``.
            image_hw: (H, W) of the network input, which the boxes are clipped to.

        Returns:
            boxes: float32 ``[B, N, 4]`` xyxy input pixels, clipped to the input.
            scores: float32 ``[B, N, C]`` ``obj * cls``, 0 on rows whose objectness is <= ``conf_thr`` (what
            ``predict_by_feat`` does before its score threshold; ``nms_pre`` is left to the NMS stage).
        """
        boxes, obj, cls = self._decode_flat(raw_outputs)
        h, w = image_hw
        boxes = torch.stack(
            [boxes[..., 0].clamp(0, w), boxes[..., 1].clamp(0, h), boxes[..., 2].clamp(0, w),
             boxes[..., 3].clamp(0, h)],
            dim=-1,
        )
        scores = torch.where(obj > float(self.test_cfg["conf_thr"]), obj * cls, torch.zeros_like(cls))
        return boxes, scores

    # ----------------------------------------------------------------- training
    def loss(self, feats: Sequence[Tensor], data_samples: Sequence[Any]) -> dict[str, Tensor]:
        return self.loss_by_feat(self(feats), data_samples)

    def _gather_gt(self, data_samples: Sequence[Any], device: torch.device) -> tuple[Tensor, Tensor, Tensor, list]:
        """Concatenated gt boxes/labels with their image index, and each image's ignored boxes."""
        boxes, labels, ignored = [], [], []
        for sample in data_samples:
            gt = sample.gt_instances if "gt_instances" in sample else None
            if gt is None or "bboxes" not in gt:
                boxes.append(torch.zeros((0, 4), device=device))
                labels.append(torch.zeros((0,), dtype=torch.long, device=device))
            else:
                boxes.append(torch.as_tensor(gt.bboxes, device=device).float().reshape(-1, 4))
                labels.append(torch.as_tensor(gt.labels, device=device).long().reshape(-1))
            ign = sample.ignored_instances if "ignored_instances" in sample else None
            has_ign = ign is not None and "bboxes" in ign
            ignored.append(
                torch.as_tensor(ign.bboxes, device=device).float().reshape(-1, 4)
                if has_ign
                else torch.zeros((0, 4), device=device)
            )
        counts = torch.tensor([len(b) for b in boxes], device=device)
        gt_labels = torch.cat(labels)
        if labels_out_of_range(gt_labels, self.num_classes,
                               f"YOLOv3Head: gt labels must be in [0, {self.num_classes - 1}]"):
            where = [
                s.metainfo.get("img_path", f"sample {i}")
                for i, (s, lb) in enumerate(zip(data_samples, labels))
                if lb.numel() and (int(lb.min()) < 0 or int(lb.max()) >= self.num_classes)
            ]
            raise DataError(
                f"YOLOv3Head: gt labels must be in [0, {self.num_classes - 1}] (num_classes={self.num_classes}); "
                f"out of range in {where}"
            )
        batch_idx = torch.repeat_interleave(torch.arange(len(boxes), device=device), counts)
        return torch.cat(boxes), gt_labels, batch_idx, [torch.cat([b, i]) for b, i in zip(boxes, ignored)]

    def get_targets(self, raw_outputs: Sequence[Tensor], data_samples: Sequence[Any]) -> tuple[YOLOTargets, Tensor]:
        """The batch's positives and the [B, N] ignore region (negatives with a predicted box overlapping a
        gt or ignored box of their image by IoU > ``ignore_thresh``)."""
        num_imgs = raw_outputs[0].shape[0]
        if len(data_samples) != num_imgs:
            raise ValueError(f"YOLOv3Head: {num_imgs} images but {len(data_samples)} data samples")
        device = raw_outputs[0].device
        sizes = [tuple(int(v) for v in r.shape[-2:]) for r in raw_outputs]
        input_shape = data_samples[0].metainfo.get("batch_input_shape") or (
            sizes[0][0] * self.strides[0],
            sizes[0][1] * self.strides[0],
        )
        gt_bboxes, gt_labels, gt_batch, region_boxes = self._gather_gt(data_samples, device)
        targets = self.assigner.assign(gt_bboxes, gt_labels, gt_batch, sizes, input_shape, num_imgs)
        with torch.no_grad():
            flat = self.flatten_outputs(raw_outputs).float()
            grid, anchors, strides = self.priors(sizes, device)
            pred_boxes = self.decode_boxes(flat[..., :4], grid, anchors, strides)
            padded = pad_sequence(region_boxes, batch_first=True)
            valid = pad_sequence([torch.ones(len(b), dtype=torch.bool, device=device) for b in region_boxes], True)
            ignored = ignore_mask(pred_boxes, padded, valid, self.ignore_thresh)
        return targets, ignored

    def loss_by_feat(self, raw_outputs: Sequence[Tensor], data_samples: Sequence[Any]) -> dict[str, Tensor]:
        """Losses summed over priors and divided by the batch size (PaddleDetection's ``YOLOv3Loss``)."""
        num_imgs = raw_outputs[0].shape[0]
        t, ignored = self.get_targets(raw_outputs, data_samples)
        flat = self.flatten_outputs(raw_outputs).float()
        # Objectness: 1 at positives, 0 at negatives except those in the ignore region.
        tobj = torch.zeros_like(flat[..., 4])
        tobj[t.batch_idx, t.prior_idx] = 1.0
        obj_weight = ((~ignored) | (tobj > 0)).float()
        loss_obj = bce_with_logits(flat[..., 4], tobj, obj_weight)

        pos = flat[t.batch_idx, t.prior_idx]  # [P, 5 + C]
        scale = t.scale[:, None]
        loss_cls = bce_with_logits(pos[:, 5:], class_targets(t.labels, self.num_classes, self.label_smooth))
        if self.scale_x_y == 1.0:
            loss_xy = bce_with_logits(pos[:, :2], t.txy, scale.expand(-1, 2))
        else:
            s = self.scale_x_y
            loss_xy = l1_sum(pos[:, :2].sigmoid() * s - 0.5 * (s - 1.0), t.txy, scale)
        loss_wh = l1_sum(pos[:, 2:4], t.twh, scale)
        w = self.weights
        losses = dict(
            loss_obj=loss_obj * w["obj"] / num_imgs,
            loss_cls=loss_cls * w["cls"] / num_imgs,
            loss_xy=loss_xy * w["xy"] / num_imgs,
            loss_wh=loss_wh * w["wh"] / num_imgs,
        )
        if self.iou_loss == "giou":
            idx = t.prior_idx
            grid, anchors, strides = self.priors([tuple(r.shape[-2:]) for r in raw_outputs], flat.device)
            boxes = self.decode_boxes(pos[:, :4], grid[idx], anchors[idx], strides[idx])
            losses["loss_iou"] = weighted_giou_loss(boxes, t.gt_bboxes, t.scale) * w["iou"] / num_imgs
        return losses

    # ----------------------------------------------------------------- inference
    def predict(self, feats: Sequence[Tensor], data_samples: Sequence[Any], rescale: bool = True) -> list[InstanceData]:
        return self.predict_by_feat(self(feats), [s.metainfo for s in data_samples], rescale)

    def predict_by_feat(
        self, raw_outputs: Sequence[Tensor], batch_img_metas: Sequence[dict[str, Any]], rescale: bool = True
    ) -> list[InstanceData]:
        """Decode, drop low objectness (``conf_thr``), NMS per class per image, then (``rescale``) map the
        boxes from input pixels to original-image pixels (``/ scale_factor``, clipped to ``ori_shape``)."""
        cfg = self.test_cfg
        boxes, obj, cls = self._decode_flat(raw_outputs)
        scores = torch.where(obj > cfg["conf_thr"], obj * cls, torch.zeros_like(cls))
        h, w = raw_outputs[0].shape[-2:]
        input_shape = (int(h) * self.strides[0], int(w) * self.strides[0])
        results = []
        for i, meta in enumerate(batch_img_metas):
            # Clip to the network input, as the exported graph does (it sees no img_shape): with a letterboxed
            # (padded) input, clipping to img_shape here would change NMS and the two would disagree. Boxes are
            # clipped to the image itself after rescaling (and by the predictors).
            img_h, img_w = (meta.get("batch_input_shape") or input_shape)[:2]
            b = clip_boxes_to_image(boxes[i].float(), (int(img_h), int(img_w)))
            if cfg["nms"].get("type") == "soft_nms":
                det_boxes, det_scores, det_labels = soft_nms_image(
                    b, scores[i].float(), cfg["nms"], cfg["score_thr"], cfg["max_per_img"], cfg["nms_pre"])
            else:
                det_boxes, det_scores, det_labels = multiclass_nms(
                    b, scores[i].float(), cfg["score_thr"], cfg["nms"]["iou_threshold"], cfg["max_per_img"],
                    cfg["nms_pre"])
            if rescale:
                sw, sh = meta.get("scale_factor", (1.0, 1.0))[:2]
                ori_h, ori_w = meta.get("ori_shape", (img_h, img_w))[:2]
                det_boxes = det_boxes / det_boxes.new_tensor([sw, sh, sw, sh])
                det_boxes = clip_boxes_to_image(det_boxes, (int(ori_h), int(ori_w)))
            results.append(InstanceData(bboxes=det_boxes, scores=det_scores, labels=det_labels))
        return results
