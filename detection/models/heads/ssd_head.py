"""SSD's head (Liu et al. 2016): per level a 3x3 conv for class logits (background included) and one for box
deltas, over default boxes; SSDLite's variant (``conv_type: depthwise``) makes each a depthwise 3x3 + BN +
ReLU6 followed by a 1x1 conv (Sandler et al. 2018).

Training matches priors to gt boxes by IoU (``MaxIoUAssigner``: >= 0.5, each gt's best prior forced), encodes the
matched boxes with the box coder (variances 0.1 / 0.2), and sums smooth-L1 over positives and softmax
cross-entropy over positives and the hardest negatives (3 per positive), both divided by the batch's positives.
Inference: softmax, background dropped, per class the ``topk_candidates`` best scores above ``score_thr``, NMS
per class, the ``max_per_img`` best (torchvision's ``SSD.postprocess_detections``). The static part of that
(:meth:`SSDHead.export_decode`) is shared by the eager path and the exported graph.

Class logits have ``num_classes + 1`` columns with the background LAST (as the R-CNN heads here; torchvision puts
it first, the converter moves it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from mmengine.structures import InstanceData
from torch import Tensor, nn
from torchvision.ops import batched_nms, clip_boxes_to_image

from detection.registry import MODELS, TASK_UTILS
from oars.errors import DataError
from oars.models.building import check_num_classes
from oars.models.layers import ConvNormAct

from ..task_utils.hard_negative_mining import hard_negative_mask
from .dense_utils import check_nms_cfg, soft_nms_image

TEST_CFG_KEYS = ("score_thr", "nms", "max_per_img", "nms_pre", "topk_candidates")
TRAIN_CFG_KEYS = ("assigner", "neg_pos_ratio")
CONV_TYPES = ("conv", "depthwise")
INITS = ("xavier", "normal")


def _check_cfg(name: str, what: str, cfg: dict[str, Any] | None, keys: Sequence[str]) -> dict[str, Any]:
    cfg = dict(cfg or {})
    unknown, missing = sorted(set(cfg) - set(keys)), sorted(set(keys) - set(cfg))
    if unknown or missing:
        raise ValueError(f"{name}: {what} needs exactly the keys {sorted(keys)}; unknown {unknown}, missing "
                         f"{missing} (see configs/_base_/models/ssd300_vgg16.yaml)")
    return cfg


def _predictor(in_channels: int, out_channels: int, conv_type: str, norm: Any, act: Any) -> nn.Module:
    if conv_type == "conv":
        return nn.Conv2d(in_channels, out_channels, 3, padding=1)
    return nn.Sequential(ConvNormAct(in_channels, in_channels, 3, groups=in_channels, norm=norm, act=act),
                         nn.Conv2d(in_channels, out_channels, 1))


@MODELS.register_module()
class SSDHead(nn.Module):
    """SSD / SSDLite detection head.

    Args:
        num_classes: object classes (given by the detector); the classifier has one more (background, last).
        in_channels: channels of each backbone level (given by the detector).
        prior_generator: config of the default boxes (``SSDPriorGenerator``).
        bbox_coder: config of the box coder (``DeltaXYWHBBoxCoder`` with stds 0.1, 0.1, 0.2, 0.2, or
            ``TorchvisionBoxCoder`` with weights 10, 10, 5, 5: the same encoding).
        loss_bbox: config of the box regression loss (``SmoothL1Loss``, beta 1), summed over the positives'
            coordinates and divided by their number (``avg_factor``).
        conv_type: ``'conv'`` (3x3 conv, SSD) or ``'depthwise'`` (depthwise 3x3 + norm + act, then 1x1: SSDLite).
        norm, act: norm and activation of the depthwise convs (SSDLite's YAML: BN eps 1e-3, momentum 0.03; ReLU6).
        init: ``'xavier'`` (uniform, SSD) or ``'normal'`` (std ``init_std``, SSDLite) for every conv, biases 0.
        init_std: std of ``'normal'``.
        train_cfg: ``assigner`` (a ``MaxIoUAssigner`` config) and ``neg_pos_ratio`` (3).
        test_cfg: ``score_thr``, ``nms: {iou_threshold}``, ``max_per_img``, ``topk_candidates`` (per class,
            before NMS) and ``nms_pre`` (the best (box, class) candidates of an image kept before NMS, as
            ``multiclass_nms`` and the dense export modules; -1: all, torchvision's SSD).
    """

    def __init__(
        self,
        num_classes: int,
        in_channels: Sequence[int],
        prior_generator: dict[str, Any],
        bbox_coder: dict[str, Any],
        loss_bbox: dict[str, Any],
        conv_type: str = "conv",
        norm: Any = "BN",
        act: Any = "ReLU6",
        init: str = "xavier",
        init_std: float = 0.03,
        train_cfg: dict[str, Any] | None = None,
        test_cfg: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        check_num_classes(name, num_classes)
        if conv_type not in CONV_TYPES:
            raise ValueError(f"{name}: conv_type={conv_type!r} is invalid; accepted: {list(CONV_TYPES)}")
        if init not in INITS:
            raise ValueError(f"{name}: init={init!r} is invalid; accepted: {list(INITS)}")
        in_channels = [in_channels] if isinstance(in_channels, int) else [int(c) for c in in_channels]
        self.num_classes = num_classes
        self.in_channels = in_channels
        self.prior_generator = TASK_UTILS.build(prior_generator)
        self.bbox_coder = TASK_UTILS.build(bbox_coder)
        self.loss_bbox = MODELS.build(loss_bbox)
        if len(in_channels) != self.prior_generator.num_levels:
            raise ValueError(f"{name}: the backbone gives {len(in_channels)} feature maps (in_channels={in_channels}) "
                             f"but the prior generator has {self.prior_generator.num_levels} levels")
        self.train_cfg = _check_cfg(name, "train_cfg", train_cfg, TRAIN_CFG_KEYS) if train_cfg else {}
        self.assigner = TASK_UTILS.build(self.train_cfg["assigner"]) if train_cfg else None
        self.test_cfg = _check_cfg(name, "test_cfg", test_cfg, TEST_CFG_KEYS)
        self.test_cfg["nms"] = check_nms_cfg(name, dict(self.test_cfg["nms"]))  # plain NMS or soft-NMS
        anchors = self.prior_generator.num_base_priors
        self.cls_convs = nn.ModuleList(_predictor(c, a * (num_classes + 1), conv_type, norm, act)
                                       for c, a in zip(in_channels, anchors))
        self.reg_convs = nn.ModuleList(_predictor(c, a * 4, conv_type, norm, act) for c, a in zip(in_channels, anchors))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                if init == "xavier":
                    nn.init.xavier_uniform_(m.weight)
                else:
                    nn.init.normal_(m.weight, std=init_std)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
        self._prior_cache: dict[tuple, Tensor] = {}

    @property
    def num_levels(self) -> int:
        return len(self.cls_convs)

    # ----------------------------------------------------------------- forward and decoding
    def forward(self, feats: Sequence[Tensor]) -> tuple[Tensor, ...]:
        """Backbone maps -> ``(cls_0, ..., cls_{L-1}, reg_0, ..., reg_{L-1})``: per level ``[B, A*(C+1), H, W]``
        class logits, then per level ``[B, A*4, H, W]`` box deltas."""
        if len(feats) != self.num_levels:
            raise ValueError(f"{type(self).__name__}: got {len(feats)} feature maps, built for {self.num_levels}")
        return tuple(conv(x) for conv, x in zip(self.cls_convs, feats)) + tuple(
            conv(x) for conv, x in zip(self.reg_convs, feats))

    def flatten_outputs(self, raw_outputs: Sequence[Tensor]) -> tuple[Tensor, Tensor, list[tuple[int, int]]]:
        """Per-level outputs -> (logits ``[B, N, C + 1]``, deltas ``[B, N, 4]``, the levels' (H, W)); priors in
        the generator's order (level, row, column, box)."""
        levels = self.num_levels
        if len(raw_outputs) != 2 * levels:
            raise ValueError(f"{type(self).__name__}: expected {2 * levels} outputs (class logits then box deltas per "
                             f"level), got {len(raw_outputs)}")

        def flat(maps: Sequence[Tensor], cols: int) -> Tensor:
            out = []
            for m in maps:
                b, _, h, w = m.shape
                out.append(m.view(b, -1, cols, h, w).permute(0, 3, 4, 1, 2).reshape(b, -1, cols))
            return torch.cat(out, dim=1)

        sizes = [(int(m.shape[-2]), int(m.shape[-1])) for m in raw_outputs[:levels]]
        return flat(raw_outputs[:levels], self.num_classes + 1), flat(raw_outputs[levels:], 4), sizes

    def priors(self, featmap_sizes: Sequence[tuple[int, int]], image_hw: Sequence[int], device: torch.device) -> Tensor:
        """``[N, 4]`` default boxes (xyxy input pixels), cached per sizes (recomputed while tracing)."""
        tracing = torch.jit.is_tracing() or torch.onnx.is_in_onnx_export() or torch.compiler.is_compiling()
        key = (tuple(featmap_sizes), (int(image_hw[0]), int(image_hw[1])), str(device))
        if not tracing and key in self._prior_cache:
            return self._prior_cache[key]
        priors = self.prior_generator.grid_priors(featmap_sizes, image_hw, device)
        if not tracing:
            self._prior_cache[key] = priors
        return priors

    def export_decode(self, raw_outputs: Sequence[Tensor], image_hw: Sequence[int]) -> tuple[Tensor, Tensor]:
        """Boxes and candidate scores of every (prior, class) pair, with fixed shapes (the exported graph's decode).

        Args:
            raw_outputs: :meth:`forward`'s outputs.
            image_hw: ``(H, W)`` of the network input (python ints).

        Returns:
            ``boxes [B, N, 4]`` float32 xyxy input pixels clipped to ``image_hw``, and ``scores [B, N, C]`` float32
            softmax probabilities without the background column, 0 where a pair is not a candidate: a candidate
            scores above ``score_thr`` and among the ``topk_candidates`` best of its class in its image.
            Per-class NMS over the candidates and the ``max_per_img`` best give :meth:`predict_by_feat`.
        """
        logits, deltas, sizes = self.flatten_outputs(raw_outputs)
        h, w = int(image_hw[0]), int(image_hw[1])
        priors = self.priors(sizes, (h, w), logits.device)
        boxes = self.bbox_coder.decode(priors[None], deltas.float())
        boxes = torch.stack([boxes[..., 0].clamp(0, w), boxes[..., 1].clamp(0, h),
                             boxes[..., 2].clamp(0, w), boxes[..., 3].clamp(0, h)], dim=-1)
        scores = F.softmax(logits.float(), dim=-1)[..., : self.num_classes]
        cfg = self.test_cfg
        keep = scores > float(cfg["score_thr"])
        k = min(int(cfg["topk_candidates"]), scores.shape[1])
        if k > 0:
            kth = scores.topk(k, dim=1).values[:, -1:, :]  # [B, 1, C]: the k-th best score of each class
            keep = keep & (scores >= kth)
        return boxes, torch.where(keep, scores, torch.zeros_like(scores))

    # ----------------------------------------------------------------- training
    def loss(self, feats: Sequence[Tensor], data_samples: Sequence[Any]) -> dict[str, Tensor]:
        return self.loss_by_feat(self(feats), data_samples)

    def _gt(self, sample: Any, device: torch.device) -> tuple[Tensor, Tensor, Tensor | None]:
        gt = sample.gt_instances if "gt_instances" in sample else None
        if gt is None or "bboxes" not in gt:
            return torch.zeros((0, 4), device=device), torch.zeros((0,), dtype=torch.long, device=device), None
        boxes = torch.as_tensor(gt.bboxes, device=device).float().reshape(-1, 4)
        labels = torch.as_tensor(gt.labels, device=device).long().reshape(-1)
        if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= self.num_classes):
            raise DataError(f"{type(self).__name__}: gt labels must be in [0, {self.num_classes - 1}] (num_classes="
                            f"{self.num_classes}); got {labels.tolist()} in {sample.metainfo.get('img_path', '?')}")
        ign = sample.ignored_instances if "ignored_instances" in sample else None
        ignored = torch.as_tensor(ign.bboxes, device=device).float().reshape(-1, 4) if (
            ign is not None and "bboxes" in ign) else None
        return boxes, labels, ignored

    def get_targets(self, priors: Tensor, data_samples: Sequence[Any]) -> tuple[Tensor, Tensor, Tensor]:
        """Per image: class targets ``[B, N]`` int64 (background = ``num_classes``; -1 ignored), matched gt boxes
        ``[B, N, 4]`` (zeros where not positive) and the positive mask ``[B, N]`` bool."""
        if self.assigner is None:
            raise ValueError(f"{type(self).__name__}: training needs train_cfg (assigner, neg_pos_ratio)")
        labels, boxes = [], []
        for sample in data_samples:  # one assignment per image; everything after is batched
            gt_boxes, gt_labels, ignored = self._gt(sample, priors.device)
            result = self.assigner.assign(priors, gt_boxes, gt_labels, ignored)
            target = torch.where(result.gt_inds > 0, result.labels, torch.full_like(result.labels, self.num_classes))
            labels.append(torch.where(result.gt_inds < 0, torch.full_like(target, -1), target))
            idx = (result.gt_inds - 1).clamp(min=0)
            boxes.append(gt_boxes[idx] if len(gt_boxes) else priors.new_zeros(priors.shape))
        labels_t = torch.stack(labels)
        positive = (labels_t >= 0) & (labels_t < self.num_classes)
        return labels_t, torch.stack(boxes), positive

    def loss_by_feat(self, raw_outputs: Sequence[Tensor], data_samples: Sequence[Any]) -> dict[str, Tensor]:
        """``loss_cls`` (CE of positives and hard negatives) and ``loss_bbox``, each summed and divided by the
        number of positives in the batch (at least 1)."""
        logits, deltas, sizes = self.flatten_outputs(raw_outputs)
        if len(data_samples) != logits.shape[0]:
            raise ValueError(f"{type(self).__name__}: {logits.shape[0]} images but {len(data_samples)} data samples")
        meta = data_samples[0].metainfo
        image_hw = meta.get("batch_input_shape") or meta.get("img_shape")
        priors = self.priors(sizes, image_hw[:2], logits.device)
        labels, gt_boxes, positive = self.get_targets(priors, data_samples)
        negative = labels == self.num_classes
        ce = F.cross_entropy(logits.float().reshape(-1, self.num_classes + 1), labels.clamp(min=0).reshape(-1),
                             reduction="none").view(labels.shape)
        hard_neg = hard_negative_mask(ce, positive, negative, float(self.train_cfg["neg_pos_ratio"]))
        num_pos = positive.sum().clamp(min=1).float()
        loss_cls = (ce * (positive | hard_neg)).sum() / num_pos
        targets = self.bbox_coder.encode(priors[None].expand_as(gt_boxes)[positive], gt_boxes[positive])
        loss_bbox = self.loss_bbox(deltas[positive].float(), targets, avg_factor=num_pos)
        return dict(loss_cls=loss_cls, loss_bbox=loss_bbox)

    # ----------------------------------------------------------------- inference
    def predict(self, feats: Sequence[Tensor], data_samples: Sequence[Any], rescale: bool = True) -> list[InstanceData]:
        return self.predict_by_feat(self(feats), [s.metainfo for s in data_samples], rescale)

    def predict_by_feat(
        self, raw_outputs: Sequence[Tensor], batch_img_metas: Sequence[dict[str, Any]], rescale: bool = True
    ) -> list[InstanceData]:
        """:meth:`export_decode` on the padded input, the ``nms_pre`` best candidates (when > 0), per-class NMS
        (``batched_nms``), the ``max_per_img`` best; with ``rescale`` boxes go to original-image pixels
        (``/ scale_factor``, clipped to ``ori_shape``)."""
        meta0 = batch_img_metas[0]
        image_hw = (meta0.get("batch_input_shape") or meta0.get("img_shape"))[:2]
        boxes, scores = self.export_decode(raw_outputs, image_hw)
        nms = self.test_cfg["nms"]
        max_per_img = int(self.test_cfg["max_per_img"])
        nms_pre = int(self.test_cfg["nms_pre"] or 0)
        results = []
        for i, meta in enumerate(batch_img_metas):  # NMS per image, as torchvision (one batched_nms each)
            prior_idx, labels = scores[i].nonzero(as_tuple=True)
            cand_boxes, cand_scores = boxes[i][prior_idx], scores[i][prior_idx, labels]
            if 0 < nms_pre < len(cand_scores):  # the global top-k the dense export modules apply too
                cand_scores, order = cand_scores.topk(nms_pre)
                cand_boxes, labels = cand_boxes[order], labels[order]
            if nms.get("type") == "soft_nms":  # the candidates as a sparse [K, C] score table, one class each
                table = cand_scores.new_zeros(len(cand_scores), scores.shape[-1])
                table[torch.arange(len(cand_scores)), labels] = cand_scores
                det_boxes, det_scores, det_labels = soft_nms_image(cand_boxes, table, nms, 0.0, max_per_img, 0)
            else:
                keep = batched_nms(cand_boxes, cand_scores, labels, float(nms["iou_threshold"]))
                if max_per_img > 0:
                    keep = keep[:max_per_img]
                det_boxes, det_scores, det_labels = cand_boxes[keep], cand_scores[keep], labels[keep]
            if rescale:
                sw, sh = meta.get("scale_factor", (1.0, 1.0))[:2]
                ori_h, ori_w = meta.get("ori_shape", image_hw)[:2]
                det_boxes = det_boxes / det_boxes.new_tensor([sw, sh, sw, sh])
                det_boxes = clip_boxes_to_image(det_boxes, (int(ori_h), int(ori_w)))
            results.append(InstanceData(bboxes=det_boxes, scores=det_scores, labels=det_labels.long()))
        return results

