"""RetinaNet's head (Lin et al. 2017, "Focal Loss for Dense Object Detection"), torchvision's module names.

Two towers of ``stacked_convs`` 3x3 conv + ReLU (shared by the pyramid levels), then a 3x3 conv giving ``A * C``
class logits and one giving ``A * 4`` box deltas per position, ``A`` anchors per position (3 scales x 3 ratios).
Training assigns every anchor of an image to a gt box with the configured assigner (``MaxIoUAssigner``: >= 0.5
positive, < 0.4 negative), then sums a sigmoid focal loss over all non-ignored (anchor, class) pairs and a box
loss (L1 / smooth-L1 on deltas, or GIoU on decoded boxes) over the positives, both divided by the batch's
number of positives. Prediction is the export seam's ``export_decode`` (decode, clip, per level the ``nms_pre``
best pairs above ``score_thr``) followed by class-wise NMS, so eager and exported models share one path.

Module names are torchvision's ``RetinaNetHead`` (``classification_head.conv.{i}.0``, ``cls_logits``,
``regression_head.conv.{i}.0``, ``bbox_reg``): a torchvision RetinaNet's ``head.*`` weights load as they are.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from mmengine.structures import InstanceData
from torch import Tensor, nn

from detection.registry import MODELS, TASK_UTILS
from oars.models.building import check_num_classes
from oars.models.layers import ConvNormAct

from .dense_utils import (
    build_priors,
    check_test_cfg,
    clip_to,
    flatten_levels,
    gather_gt,
    input_hw,
    level_candidates,
    nms_predict,
    shared_tower_channels,
    single_assigner_cfg,
)


def _img_hw(meta: dict[str, Any]) -> tuple[int, int]:
    shape = meta.get("img_shape") or meta.get("batch_input_shape")
    if shape is None:
        raise ValueError("RetinaHead: a data sample has neither 'img_shape' nor 'batch_input_shape' in its metainfo")
    return int(shape[0]), int(shape[1])


@MODELS.register_module()
class RetinaHead(nn.Module):
    """RetinaNet head (sigmoid classification, one box per anchor).

    Args:
        num_classes: object classes (given by the detector).
        in_channels: channels of the neck's levels (given by the detector; all equal).
        anchor_generator: ``TASK_UTILS`` config, e.g. ``{type: AnchorGenerator, octave_base_scale: 4,
            scales_per_octave: 3, ratios: [0.5, 1.0, 2.0], strides: [8, 16, 32, 64, 128]}``.
        bbox_coder: ``TASK_UTILS`` config (``DeltaXYWHBBoxCoder`` or ``TorchvisionBoxCoder``).
        loss_cls: ``MODELS`` config of the classification loss (``FocalLoss``).
        loss_bbox: ``MODELS`` config of the box loss: ``L1Loss`` / ``SmoothL1Loss`` on deltas, or ``GIoULoss``
            (``decodes_boxes``) on decoded boxes.
        strides: the levels' strides (the detector passes the neck's; must equal the anchor generator's).
        stacked_convs: 3x3 convs per tower.
        norm: optional norm of the tower convs (None as in the paper and torchvision's v1; GN for v2).
        prior_prob: initial foreground probability of every class logit (bias ``-log((1 - p) / p)``).
        train_cfg: ``{assigner: {type: MaxIoUAssigner, ...}}``.
        test_cfg: ``score_thr``, ``nms_pre`` (per level), ``nms: {iou_threshold}``, ``max_per_img``.
    """

    nms_pre_in_decode = True  # export seam: export_decode applies test_cfg.nms_pre per level
    export_any_size = True  # priors tile any feature-map size: export inputs need only the preprocessor's divisor
    export_score_meaning = ("sigmoid class probability per anchor and class; 0 unless > score_thr and among the "
                            "nms_pre best pairs of its level")

    def __init__(
        self,
        num_classes: int,
        in_channels: int | Sequence[int],
        anchor_generator: dict[str, Any],
        bbox_coder: dict[str, Any],
        loss_cls: dict[str, Any],
        loss_bbox: dict[str, Any],
        strides: Sequence[int] | None = None,
        stacked_convs: int = 4,
        norm: Any = None,
        prior_prob: float = 0.01,
        train_cfg: dict[str, Any] | None = None,
        test_cfg: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        self.num_classes = check_num_classes(name, num_classes)
        channels = shared_tower_channels(name, in_channels)
        self.prior_generator, self.strides = build_priors(name, anchor_generator, strides, prior_prob)
        if len(set(self.prior_generator.num_base_anchors)) != 1:
            raise ValueError(f"{name}: every level needs the same number of anchors per position")
        self.num_anchors = self.prior_generator.num_base_anchors[0]
        self.bbox_coder = TASK_UTILS.build(dict(bbox_coder))
        self.loss_cls = MODELS.build(dict(loss_cls))
        self.loss_bbox = MODELS.build(dict(loss_bbox))
        self.train_cfg = single_assigner_cfg(name, train_cfg, "MaxIoUAssigner")
        self.assigner = TASK_UTILS.build(dict(self.train_cfg["assigner"]))
        self.test_cfg = check_test_cfg(name, test_cfg)

        def tower() -> nn.Sequential:
            return nn.Sequential(*(ConvNormAct(channels, channels, 3, norm=norm, act="ReLU")
                                   for _ in range(stacked_convs)))

        a = self.num_anchors
        self.classification_head = nn.ModuleDict(
            dict(conv=tower(), cls_logits=nn.Conv2d(channels, a * num_classes, 3, padding=1)))
        self.regression_head = nn.ModuleDict(dict(conv=tower(), bbox_reg=nn.Conv2d(channels, a * 4, 3, padding=1)))
        self.prior_prob = float(prior_prob)
        self.init_weights()

    def init_weights(self) -> None:
        """Normal(0, 0.01) conv weights, zero biases, class biases at ``prior_prob`` (the paper's, torchvision's)."""
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.normal_(m.weight, std=0.01)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
        nn.init.constant_(self.classification_head["cls_logits"].bias,
                          -math.log((1 - self.prior_prob) / self.prior_prob))

    def forward(self, feats: Sequence[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
        """Neck levels ``[B, C_in, H_l, W_l]`` -> (class logits ``[B, A * C, H_l, W_l]``, deltas ``[B, A * 4, H_l,
        W_l]``) per level."""
        if len(feats) != len(self.strides):
            raise ValueError(f"{type(self).__name__}: got {len(feats)} feature maps, built for {len(self.strides)} "
                             f"levels (strides {self.strides})")
        cls = self.classification_head
        reg = self.regression_head
        return [cls["cls_logits"](cls["conv"](x)) for x in feats], [reg["bbox_reg"](reg["conv"](x)) for x in feats]

    def _anchors(self, cls_scores: Sequence[Tensor], image_hw: Sequence[int]) -> tuple[Tensor, list[int]]:
        sizes = [(c.shape[-2], c.shape[-1]) for c in cls_scores]
        levels = self.prior_generator.grid_priors(sizes, cls_scores[0].device, torch.float32, image_size=image_hw)
        return torch.cat(levels), [len(a) for a in levels]

    # ----------------------------------------------------------------- export seam and prediction
    def export_decode(self, raw_outputs: tuple[Sequence[Tensor], Sequence[Tensor]], image_hw: Sequence[int]
                      ) -> tuple[Tensor, Tensor]:
        """Raw outputs -> (boxes float32 ``[B, N, 4]`` xyxy input pixels clipped to the input, scores float32
        ``[B, N, C]`` sigmoid probabilities, 0 unless > ``score_thr`` and among the ``nms_pre`` best pairs of
        their level). N = anchors of all levels; fixed shapes (see :mod:`detection.export.module`)."""
        cls_scores, bbox_preds = raw_outputs
        anchors, _ = self._anchors(cls_scores, image_hw)
        scores = flatten_levels(cls_scores, self.num_classes).float().sigmoid()
        deltas = flatten_levels(bbox_preds, 4).float()
        boxes = clip_to(self.bbox_coder.decode(anchors, deltas), image_hw)  # anchors broadcast from the left
        cfg = self.test_cfg
        maps = [c.float().sigmoid() for c in cls_scores]
        return boxes, level_candidates(scores, maps, cfg["score_thr"], cfg["nms_pre"])

    def predict(self, feats: Sequence[Tensor], data_samples: Sequence[Any], rescale: bool = True
                ) -> list[InstanceData]:
        return self.predict_by_feat(self(feats), [s.metainfo for s in data_samples], rescale)

    def predict_by_feat(self, raw_outputs: tuple[Sequence[Tensor], Sequence[Tensor]],
                        batch_img_metas: Sequence[dict[str, Any]], rescale: bool = True) -> list[InstanceData]:
        """``export_decode`` on the batch input, then class-wise NMS per image (boxes clipped to the network
        input, as the exported graph; original pixels when ``rescale``)."""
        hw = input_hw(batch_img_metas, raw_outputs[0][0].shape[-2:], self.strides[0])
        boxes, scores = self.export_decode(raw_outputs, hw)
        cfg = self.test_cfg
        return nms_predict(boxes, scores, batch_img_metas, cfg["nms"], cfg["max_per_img"], rescale)

    # ----------------------------------------------------------------- training
    def loss(self, feats: Sequence[Tensor], data_samples: Sequence[Any]) -> dict[str, Tensor]:
        return self.loss_by_feat(*self(feats), data_samples)

    @torch.no_grad()
    def get_targets(self, anchors: Tensor, featmap_sizes: list[tuple[int, int]], data_samples: Sequence[Any]
                    ) -> tuple[Tensor, Tensor, Tensor]:
        """Per image and anchor: gt index (``-1`` ignored, ``0`` negative, ``k > 0`` the k-th gt), class labels
        (int64, ``num_classes`` = background) and matched gt boxes (float32, 0 where not positive).

        Returns:
            ``gt_inds [B, N]`` int64, ``labels [B, N]`` int64, ``gt_boxes [B, N, 4]`` float32.
        """
        device = anchors.device
        boxes, labels, ignored = gather_gt(type(self).__name__, data_samples, self.num_classes, device)
        inds, labs, matched = [], [], []
        for sample, gt_b, gt_l, ign in zip(data_samples, boxes, labels, ignored):
            valid = torch.cat(self.prior_generator.valid_flags(featmap_sizes, _img_hw(sample.metainfo), device))
            res = self.assigner.assign(anchors, gt_b, gt_l, ign if len(ign) else None)
            gt_inds = torch.where(valid, res.gt_inds, torch.full_like(res.gt_inds, -1))
            pos = gt_inds > 0
            lab = torch.where(pos, res.labels, torch.full_like(res.labels, self.num_classes))
            box = gt_b[(gt_inds - 1).clamp(min=0)] if len(gt_b) else anchors.new_zeros(anchors.shape)
            inds.append(gt_inds)
            labs.append(lab)
            matched.append(torch.where(pos[:, None], box, torch.zeros_like(box)))
        return torch.stack(inds), torch.stack(labs), torch.stack(matched)

    def loss_by_feat(self, cls_scores: Sequence[Tensor], bbox_preds: Sequence[Tensor], data_samples: Sequence[Any]
                     ) -> dict[str, Tensor]:
        """``loss_cls`` (focal, over non-ignored anchors x classes) and ``loss_bbox`` (positives), each divided
        by the batch's number of positives (at least 1); a batch without gt gives a zero box loss that still has
        a gradient."""
        num_imgs = cls_scores[0].shape[0]
        if len(data_samples) != num_imgs:
            raise ValueError(f"{type(self).__name__}: {num_imgs} images but {len(data_samples)} data samples")
        metas = [s.metainfo for s in data_samples]
        sizes = [(int(c.shape[-2]), int(c.shape[-1])) for c in cls_scores]
        anchors, _ = self._anchors(cls_scores, input_hw(metas, sizes[0], self.strides[0]))
        logits = flatten_levels(cls_scores, self.num_classes)
        deltas = flatten_levels(bbox_preds, 4)
        gt_inds, labels, gt_boxes = self.get_targets(anchors, sizes, data_samples)
        pos = gt_inds > 0
        num_pos = float(max(int(pos.sum()), 1))
        loss_cls = self.loss_cls(logits.reshape(-1, self.num_classes), labels.reshape(-1),
                                 (gt_inds >= 0).reshape(-1), avg_factor=num_pos)
        img_idx, anchor_idx = pos.nonzero(as_tuple=True)
        pos_anchors, pos_gt = anchors[anchor_idx], gt_boxes[img_idx, anchor_idx]
        pos_deltas = deltas[img_idx, anchor_idx]
        if getattr(self.loss_bbox, "decodes_boxes", False):
            loss_bbox = self.loss_bbox(self.bbox_coder.decode(pos_anchors, pos_deltas), pos_gt, avg_factor=num_pos)
        else:
            loss_bbox = self.loss_bbox(pos_deltas, self.bbox_coder.encode(pos_anchors, pos_gt), avg_factor=num_pos)
        return dict(loss_cls=loss_cls, loss_bbox=loss_bbox)
