"""FCOS's head (Tian et al. 2019, "FCOS: Fully Convolutional One-Stage Object Detection"), torchvision's names.

Two towers of ``stacked_convs`` x (3x3 conv, GroupNorm, ReLU), shared by the levels; the classification tower
ends in ``C`` logits per position, the regression tower in 4 distances (left, top, right, bottom) and the
centerness logit (centerness on the regression branch, as FCOS v2 and torchvision). Distances are
``relu(scale_l * x)`` in units of the level's stride (``norm_on_bbox``), ``scale_l`` a learnable per-level scalar
when ``scale_per_level`` (MMDetection; torchvision has none). Points are the centres of the anchor generator's
one stride-sized anchor per position (``center_offset`` 0.5 as MMDetection, 0 as torchvision).

Training: :class:`~detection.models.task_utils.FCOSAssigner` (a ``TASK_UTILS`` part) assigns the points; focal
loss over all (point, class) pairs, box loss (GIoU on decoded boxes, or L1 on the normalised distances) and a
binary cross-entropy on centerness over the positives, each divided by the batch's number of positives
(torchvision's normalisation). Prediction: ``export_decode`` (score ``sqrt(sigmoid(cls) * sigmoid(ctr))``,
per level the ``nms_pre`` best pairs above ``score_thr``) then class-wise NMS, as torchvision's postprocess.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from mmengine.structures import InstanceData
from torch import Tensor, nn
from torch.nn.utils.rnn import pad_sequence

from detection.registry import MODELS, TASK_UTILS
from oars.models.building import check_num_classes
from oars.models.layers import build_norm_layer

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


def _tower(channels: int, num: int, norm: Any) -> nn.Sequential:
    """torchvision's FCOS tower: (Conv2d with bias, norm, ReLU) x num, flat (``conv.0``, ``conv.1``, ``conv.3``...)."""
    layers: list[nn.Module] = []
    for _ in range(num):
        layers.append(nn.Conv2d(channels, channels, 3, padding=1))
        if norm is not None:
            layers.append(build_norm_layer(norm, channels))
        layers.append(nn.ReLU())
    return nn.Sequential(*layers)


@MODELS.register_module()
class FCOSHead(nn.Module):
    """FCOS head (sigmoid classification, centerness, distances to the box sides).

    Args:
        num_classes: object classes (given by the detector).
        in_channels: channels of the neck's levels (given by the detector; all equal).
        anchor_generator: ``TASK_UTILS`` config of one anchor per position whose centre is the point and whose
            size is the stride, e.g. ``{type: AnchorGenerator, strides: [8, ..., 128], ratios: [1.0], scales:
            [1.0], center_offset: 0.5}``.
        loss_cls: ``MODELS`` config of the classification loss (``FocalLoss``).
        loss_bbox: ``GIoULoss`` (on decoded boxes) or ``L1Loss`` / ``SmoothL1Loss`` (on distances / stride).
        loss_centerness: ``CrossEntropyLoss`` with ``use_sigmoid: true``.
        strides: the levels' strides (the detector passes the neck's; must equal the anchor generator's).
        stacked_convs: 3x3 convs per tower.
        norm: norm of the tower convs (``{type: GN, num_groups: 32}``; None: none).
        scale_per_level: a learnable scalar per level multiplies the distances (MMDetection).
        prior_prob: initial foreground probability of every class logit.
        train_cfg: ``{assigner: {type: FCOSAssigner, regress_ranges: ..., center_sampling_radius: 1.5}}``.
        test_cfg: ``score_thr``, ``nms_pre`` (per level), ``nms: {iou_threshold}``, ``max_per_img``.
    """

    nms_pre_in_decode = True  # export seam: export_decode applies test_cfg.nms_pre per level
    export_any_size = True  # priors tile any feature-map size: export inputs need only the preprocessor's divisor
    export_score_meaning = ("sqrt(sigmoid class probability * sigmoid centerness) per point and class; 0 unless "
                            "> score_thr and among the nms_pre best pairs of its level")

    def __init__(
        self,
        num_classes: int,
        in_channels: int | Sequence[int],
        anchor_generator: dict[str, Any],
        loss_cls: dict[str, Any],
        loss_bbox: dict[str, Any],
        loss_centerness: dict[str, Any],
        strides: Sequence[int] | None = None,
        stacked_convs: int = 4,
        norm: Any = None,
        scale_per_level: bool = True,
        prior_prob: float = 0.01,
        train_cfg: dict[str, Any] | None = None,
        test_cfg: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        self.num_classes = check_num_classes(name, num_classes)
        channels = shared_tower_channels(name, in_channels)
        self.prior_generator, self.strides = build_priors(name, anchor_generator, strides, prior_prob)
        if any(n != 1 for n in self.prior_generator.num_base_anchors):
            raise ValueError(f"{name}: the anchor generator must give one anchor per position (ratios [1.0], one "
                             f"scale), got {self.prior_generator.num_base_anchors}")
        self.loss_cls = MODELS.build(dict(loss_cls))
        self.loss_bbox = MODELS.build(dict(loss_bbox))
        self.loss_centerness = MODELS.build(dict(loss_centerness))
        self.train_cfg = single_assigner_cfg(name, train_cfg, "FCOSAssigner")
        self.assigner = TASK_UTILS.build(dict(self.train_cfg["assigner"]))
        self.test_cfg = check_test_cfg(name, test_cfg)
        self.classification_head = nn.ModuleDict(dict(
            conv=_tower(channels, stacked_convs, norm), cls_logits=nn.Conv2d(channels, num_classes, 3, padding=1)))
        self.regression_head = nn.ModuleDict(dict(
            conv=_tower(channels, stacked_convs, norm), bbox_reg=nn.Conv2d(channels, 4, 3, padding=1),
            bbox_ctrness=nn.Conv2d(channels, 1, 3, padding=1)))
        self.scales = nn.Parameter(torch.ones(len(self.strides))) if scale_per_level else None
        self.prior_prob = float(prior_prob)
        self.init_weights()

    def init_weights(self) -> None:
        """Normal(0, 0.01) conv weights, zero biases, class biases at ``prior_prob`` (torchvision's, the paper's)."""
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.normal_(m.weight, std=0.01)
                nn.init.zeros_(m.bias)
        nn.init.constant_(self.classification_head["cls_logits"].bias,
                          -math.log((1 - self.prior_prob) / self.prior_prob))

    def forward(self, feats: Sequence[Tensor]) -> tuple[list[Tensor], list[Tensor], list[Tensor]]:
        """Neck levels -> per level class logits ``[B, C, H, W]``, distances ``[B, 4, H, W]`` (>= 0, in strides)
        and centerness logits ``[B, 1, H, W]``."""
        if len(feats) != len(self.strides):
            raise ValueError(f"{type(self).__name__}: got {len(feats)} feature maps, built for {len(self.strides)} "
                             f"levels (strides {self.strides})")
        cls, reg = self.classification_head, self.regression_head
        logits, dists, ctrs = [], [], []
        for i, x in enumerate(feats):
            logits.append(cls["cls_logits"](cls["conv"](x)))
            feat = reg["conv"](x)
            d = reg["bbox_reg"](feat)
            dists.append(torch.relu(d * self.scales[i] if self.scales is not None else d))
            ctrs.append(reg["bbox_ctrness"](feat))
        return logits, dists, ctrs

    def _points(self, logits: Sequence[Tensor], image_hw: Sequence[int]) -> tuple[Tensor, Tensor, list[int]]:
        """Anchors ``[N, 4]`` (one per position, stride-sized), their strides ``[N]`` and the points per level."""
        sizes = [(c.shape[-2], c.shape[-1]) for c in logits]
        levels = self.prior_generator.grid_priors(sizes, logits[0].device, torch.float32, image_size=image_hw)
        anchors = torch.cat(levels)
        return anchors, anchors[:, 2] - anchors[:, 0], [len(a) for a in levels]

    @staticmethod
    def decode(anchors: Tensor, dists: Tensor) -> Tensor:
        """Distances (in anchor sizes) ``[..., 4]`` from anchor centres -> xyxy boxes (torchvision's
        ``BoxLinearCoder(normalize_by_size=True).decode``, same order of operations)."""
        ctr_x = 0.5 * (anchors[..., 0] + anchors[..., 2])
        ctr_y = 0.5 * (anchors[..., 1] + anchors[..., 3])
        w = anchors[..., 2] - anchors[..., 0]
        h = anchors[..., 3] - anchors[..., 1]
        d = dists * torch.stack([w, h, w, h], dim=-1)
        return torch.stack([ctr_x - d[..., 0], ctr_y - d[..., 1], ctr_x + d[..., 2], ctr_y + d[..., 3]], dim=-1)

    @staticmethod
    def encode(anchors: Tensor, boxes: Tensor) -> Tensor:
        """xyxy boxes -> distances from anchor centres in anchor sizes (the inverse of :meth:`decode`)."""
        ctr_x = 0.5 * (anchors[..., 0] + anchors[..., 2])
        ctr_y = 0.5 * (anchors[..., 1] + anchors[..., 3])
        w = anchors[..., 2] - anchors[..., 0]
        h = anchors[..., 3] - anchors[..., 1]
        d = torch.stack([ctr_x - boxes[..., 0], ctr_y - boxes[..., 1], boxes[..., 2] - ctr_x, boxes[..., 3] - ctr_y],
                        dim=-1)
        return d / torch.stack([w, h, w, h], dim=-1)

    # ----------------------------------------------------------------- export seam and prediction
    def export_decode(self, raw_outputs: tuple[Sequence[Tensor], Sequence[Tensor], Sequence[Tensor]],
                      image_hw: Sequence[int]) -> tuple[Tensor, Tensor]:
        """Raw outputs -> (boxes float32 ``[B, N, 4]`` xyxy input pixels clipped to the input, scores float32
        ``[B, N, C]`` = ``sqrt(sigmoid(cls) * sigmoid(ctr))``, 0 unless > ``score_thr`` and among the ``nms_pre``
        best pairs of their level). N = points of all levels; fixed shapes (see :mod:`detection.export.module`)."""
        logits, dists, ctrs = raw_outputs
        anchors, _, _ = self._points(logits, image_hw)
        cls = flatten_levels(logits, self.num_classes).float()
        ctr = flatten_levels(ctrs, 1).float()
        scores = torch.sqrt(torch.sigmoid(cls) * torch.sigmoid(ctr))
        boxes = clip_to(self.decode(anchors, flatten_levels(dists, 4).float()), image_hw)  # [N, 4] vs [B, N, 4]
        cfg = self.test_cfg
        maps = [torch.sqrt(torch.sigmoid(c.float()) * torch.sigmoid(t.float())) for c, t in zip(logits, ctrs)]
        return boxes, level_candidates(scores, maps, cfg["score_thr"], cfg["nms_pre"])

    def predict(self, feats: Sequence[Tensor], data_samples: Sequence[Any], rescale: bool = True
                ) -> list[InstanceData]:
        return self.predict_by_feat(self(feats), [s.metainfo for s in data_samples], rescale)

    def predict_by_feat(self, raw_outputs: tuple[Sequence[Tensor], ...], batch_img_metas: Sequence[dict[str, Any]],
                        rescale: bool = True) -> list[InstanceData]:
        """``export_decode`` on the batch input, then class-wise NMS per image (original pixels when
        ``rescale``)."""
        hw = input_hw(batch_img_metas, raw_outputs[0][0].shape[-2:], self.strides[0])
        boxes, scores = self.export_decode(raw_outputs, hw)
        cfg = self.test_cfg
        return nms_predict(boxes, scores, batch_img_metas, cfg["nms"], cfg["max_per_img"], rescale)

    # ----------------------------------------------------------------- training
    def loss(self, feats: Sequence[Tensor], data_samples: Sequence[Any]) -> dict[str, Tensor]:
        return self.loss_by_feat(*self(feats), data_samples)

    @torch.no_grad()
    def get_targets(self, anchors: Tensor, strides: Tensor, level_sizes: list[int], data_samples: Sequence[Any]
                    ) -> tuple[Tensor, Tensor, Tensor]:
        """Per image and point: matched gt index (-1 background), class label (``num_classes`` = background) and
        matched gt box (xyxy, 0 at background).

        Returns:
            ``matched [B, N]`` int64, ``labels [B, N]`` int64, ``gt_boxes [B, N, 4]`` float32.
        """
        device = anchors.device
        boxes, labels, _ = gather_gt(type(self).__name__, data_samples, self.num_classes, device)
        padded = pad_sequence(boxes, batch_first=True) if boxes else anchors.new_zeros((0, 0, 4))
        padded_labels = pad_sequence(labels, batch_first=True, padding_value=self.num_classes)
        valid = pad_sequence([torch.ones(len(b), dtype=torch.bool, device=device) for b in boxes], batch_first=True)
        points = 0.5 * (anchors[:, :2] + anchors[:, 2:])
        matched = self.assigner.assign(points, strides, level_sizes, padded, valid)
        safe = matched.clamp(min=0)
        fg = matched >= 0
        if padded.shape[1] == 0:
            b, n = matched.shape
            return matched, matched.new_full((b, n), self.num_classes), anchors.new_zeros((b, n, 4))
        lab = torch.where(fg, padded_labels.gather(1, safe), torch.full_like(safe, self.num_classes))
        gt = torch.where(fg[..., None], padded.gather(1, safe[..., None].expand(-1, -1, 4)), torch.zeros(()))
        return matched, lab, gt

    def loss_by_feat(self, logits: Sequence[Tensor], dists: Sequence[Tensor], ctrs: Sequence[Tensor],
                     data_samples: Sequence[Any]) -> dict[str, Tensor]:
        """``loss_cls`` (focal, all points x classes), ``loss_bbox`` and ``loss_centerness`` (positives), each
        divided by the batch's number of positives (at least 1)."""
        num_imgs = logits[0].shape[0]
        if len(data_samples) != num_imgs:
            raise ValueError(f"{type(self).__name__}: {num_imgs} images but {len(data_samples)} data samples")
        metas = [s.metainfo for s in data_samples]
        anchors, strides, level_sizes = self._points(logits, input_hw(metas, logits[0].shape[-2:], self.strides[0]))
        matched, labels, gt_boxes = self.get_targets(anchors, strides, level_sizes, data_samples)
        cls = flatten_levels(logits, self.num_classes)
        dist = flatten_levels(dists, 4)
        ctr = flatten_levels(ctrs, 1)[..., 0]
        fg = matched >= 0
        num_pos = float(max(int(fg.sum()), 1))
        loss_cls = self.loss_cls(cls.reshape(-1, self.num_classes), labels.reshape(-1), avg_factor=num_pos)
        img_idx, pt_idx = fg.nonzero(as_tuple=True)
        pos_anchors, pos_gt, pos_dist = anchors[pt_idx], gt_boxes[img_idx, pt_idx], dist[img_idx, pt_idx].float()
        target = self.encode(pos_anchors, pos_gt)
        if getattr(self.loss_bbox, "decodes_boxes", False):
            loss_bbox = self.loss_bbox(self.decode(pos_anchors, pos_dist), pos_gt, avg_factor=num_pos)
        else:
            loss_bbox = self.loss_bbox(pos_dist, target, avg_factor=num_pos)
        lr, tb = target[:, [0, 2]], target[:, [1, 3]]
        ctr_target = torch.sqrt((lr.min(dim=-1).values / lr.max(dim=-1).values)
                                * (tb.min(dim=-1).values / tb.max(dim=-1).values))
        loss_ctr = self.loss_centerness(ctr[img_idx, pt_idx], ctr_target, avg_factor=num_pos)
        return dict(loss_cls=loss_cls, loss_bbox=loss_bbox, loss_centerness=loss_ctr)
