"""Region Proposal Network head (Ren et al. 2015) as MMDetection's ``RPNHead``, torchvision's parameter names.

A 3x3 conv + ReLU shared by all pyramid levels, then two 1x1 convs: ``A`` objectness logits and ``4A`` box
deltas per position (``A`` anchors per position). Training assigns the anchors of all levels of an image to its
gt boxes (``MaxIoUAssigner``), samples 256 of them (``RandomSampler``) and averages a sigmoid cross-entropy and
a box loss over the sampled anchors. Proposals: the ``nms_pre`` best anchors per level, decoded and clipped to
the image, small boxes dropped, NMS per level, the ``max_per_img`` best kept.

Module names are torchvision's ``RPNHead`` (``conv.0.0``, ``cls_logits``, ``bbox_pred``), so a torchvision
Faster R-CNN's ``rpn.head.*`` weights load as they are (with its anchors: ``center_offset=0``,
``round_base_anchors=True``, ``strides_from_image=True``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from mmengine.structures import InstanceData
from torch import Tensor, nn

from detection.registry import MODELS, TASK_UTILS
from oars.models.layers import ConvNormAct

from .. import ops  # noqa: F401  (registers torch.ops.oars.nms)
from .rpn_config import anchor_inside_flags, check_proposal_cfg, check_train_cfg


def _img_hw(meta: dict[str, Any]) -> tuple[int, int]:
    shape = meta.get("img_shape") or meta.get("batch_input_shape")
    if shape is None:
        raise ValueError("RPNHead: a data sample has neither 'img_shape' nor 'batch_input_shape' in its metainfo")
    return int(shape[0]), int(shape[1])


@MODELS.register_module()
class RPNHead(nn.Module):
    """MMDetection's ``RPNHead`` (one objectness logit per anchor, sigmoid), torchvision's module names.

    Args:
        in_channels: channels of the neck's outputs (the detector passes the FPN's ``out_channels``); a list
            must hold one value, the conv is shared by the levels.
        anchor_generator: config of the anchor generator (``TASK_UTILS``), e.g. ``{type: AnchorGenerator,
            scales: [8], ratios: [0.5, 1.0, 2.0], strides: [4, 8, 16, 32, 64]}``; ``strides`` may be left out,
            then the head's ``strides`` are used.
        bbox_coder: config of the box coder (``TASK_UTILS``; Faster R-CNN: ``DeltaXYWHBBoxCoder``, means 0, stds 1).
        loss_cls: config (``MODELS``) of the objectness loss; must be sigmoid based
            (``CrossEntropyLoss(use_sigmoid=True)``).
        loss_bbox: config of the box loss on the encoded deltas of positives (Faster R-CNN: ``L1Loss``).
        num_convs: number of shared 3x3 conv + ReLU layers (1 in the paper).
        test_cfg: mmdet's ``test_cfg.rpn``, see :func:`check_proposal_cfg`.
        train_cfg: mmdet's ``train_cfg.rpn``: ``assigner`` (MaxIoUAssigner 0.7 / 0.3), ``sampler`` (RandomSampler
            256, 0.5, no gt added), ``allowed_border`` (-1: all anchors inside the un-padded image take part;
            ``>= 0``: also not crossing the border by more), ``pos_weight`` (``<= 0``: 1); None: inference only.
        feat_channels: channels of the shared conv (None: ``in_channels``, as torchvision).
        strides: the strides of the inputs (the detector passes the neck's ``out_strides``); checked against
            the anchor generator's.

    The values of the shipped configs are in the base model YAML files (``configs/_base_/models/*rcnn*.yaml``).
    """

    def __init__(
        self,
        in_channels: int | Sequence[int],
        anchor_generator: dict[str, Any],
        bbox_coder: dict[str, Any],
        loss_cls: dict[str, Any],
        loss_bbox: dict[str, Any],
        num_convs: int,
        test_cfg: dict[str, Any],
        train_cfg: dict[str, Any] | None = None,
        feat_channels: int | None = None,
        strides: Sequence[int] | None = None,
    ) -> None:
        super().__init__()
        channels = [in_channels] if isinstance(in_channels, int) else [int(c) for c in in_channels]
        if not channels or len(set(channels)) != 1 or channels[0] <= 0:
            raise ValueError(
                f"RPNHead: in_channels={in_channels!r} must be one positive int (a list only of equal values): its "
                "conv is shared by all levels"
            )
        self.in_channels = channels[0]
        self.feat_channels = self.in_channels if feat_channels is None else int(feat_channels)
        if self.feat_channels <= 0 or not isinstance(num_convs, int) or num_convs < 1:
            raise ValueError(f"RPNHead: feat_channels ({feat_channels!r}) and num_convs ({num_convs!r}) must be >= 1")
        for key, cfg in (("anchor_generator", anchor_generator), ("bbox_coder", bbox_coder), ("loss_cls", loss_cls),
                         ("loss_bbox", loss_bbox)):
            if not isinstance(cfg, dict) or "type" not in cfg:
                raise ValueError(f"RPNHead: {key} must be a config dict with a type (the base model YAML states it), "
                                 f"got {cfg!r}")

        anchor_cfg = dict(anchor_generator)
        if strides is not None:
            strides = [int(s) for s in strides]
            if "strides" not in anchor_cfg:
                anchor_cfg["strides"] = strides
            elif [int(s) for s in anchor_cfg["strides"]] != strides:
                raise ValueError(
                    f"RPNHead: anchor_generator.strides={list(anchor_cfg['strides'])} but the feature maps it gets "
                    f"have strides {strides}; drop anchor_generator.strides (it is inferred) or fix the neck"
                )
        if "strides" not in anchor_cfg:
            raise ValueError("RPNHead: anchor_generator needs strides (or the head's strides from the neck)")
        self.prior_generator = TASK_UTILS.build(anchor_cfg)
        num_anchors = set(self.prior_generator.num_base_anchors)
        if len(num_anchors) != 1:
            raise ValueError(
                f"RPNHead: every level needs the same number of anchors (one shared conv), got "
                f"{self.prior_generator.num_base_anchors}"
            )
        self.num_anchors = num_anchors.pop()
        self.bbox_coder = TASK_UTILS.build(dict(bbox_coder))
        self.loss_cls = MODELS.build(dict(loss_cls))
        if not getattr(self.loss_cls, "use_sigmoid", False):
            raise ValueError(
                f"RPNHead: loss_cls must be a sigmoid loss (one objectness logit per anchor), got {loss_cls!r}; "
                "set use_sigmoid: true"
            )
        self.loss_bbox = MODELS.build(dict(loss_bbox))

        self.train_cfg = check_train_cfg(train_cfg)
        self.test_cfg = check_proposal_cfg(test_cfg)
        self.assigner = self.sampler = None
        if self.train_cfg is not None:
            self.assigner = TASK_UTILS.build(dict(self.train_cfg["assigner"]))
            self.sampler = TASK_UTILS.build(dict(self.train_cfg["sampler"]))
            if getattr(self.sampler, "add_gt_as_proposals", False):
                raise ValueError(
                    "RPNHead: train_cfg.sampler.add_gt_as_proposals must be false: the RPN trains on anchors, gt "
                    "boxes are no anchors"
                )

        convs = [ConvNormAct(self.in_channels, self.feat_channels, 3, norm=None, act="ReLU")]
        convs += [ConvNormAct(self.feat_channels, self.feat_channels, 3, norm=None, act="ReLU")
                  for _ in range(int(num_convs) - 1)]
        self.conv = nn.Sequential(*convs)
        self.cls_logits = nn.Conv2d(self.feat_channels, self.num_anchors, 1)
        self.bbox_pred = nn.Conv2d(self.feat_channels, self.num_anchors * 4, 1)
        self.init_weights()

    def init_weights(self) -> None:
        """Normal(0, 0.01) conv weights, zero biases (MMDetection's and torchvision's RPN init)."""
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.normal_(m.weight, std=0.01)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    # ----------------------------------------------------------------- forward
    def forward(self, feats: Sequence[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
        """Neck maps, finest first -> (objectness logits per level ``[B, A, H, W]``, deltas ``[B, 4A, H, W]``)."""
        if isinstance(feats, Tensor) or len(feats) != self.prior_generator.num_levels:
            got = "one tensor" if isinstance(feats, Tensor) else f"{len(feats)} feature maps"
            raise ValueError(
                f"RPNHead: got {got}, built for {self.prior_generator.num_levels} levels (anchor_generator.strides="
                f"{self.prior_generator.strides})"
            )
        cls_scores, bbox_preds = [], []
        for x in feats:
            h = self.conv(x)
            cls_scores.append(self.cls_logits(h))
            bbox_preds.append(self.bbox_pred(h))
        return cls_scores, bbox_preds

    def _flatten(self, cls_scores: Sequence[Tensor], bbox_preds: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
        """Per-level outputs -> logits ``[B, N]`` and deltas ``[B, N, 4]``, in the order of the anchors."""
        b = cls_scores[0].shape[0]
        logits = torch.cat([c.permute(0, 2, 3, 1).reshape(b, -1) for c in cls_scores], dim=1)
        deltas = torch.cat([d.permute(0, 2, 3, 1).reshape(b, -1, 4) for d in bbox_preds], dim=1)
        return logits, deltas

    def _anchors(self, cls_scores: Sequence[Tensor], batch_input_shape: Sequence[int] | None) -> list[Tensor]:
        sizes = [(c.shape[-2], c.shape[-1]) for c in cls_scores]
        return self.prior_generator.grid_priors(sizes, cls_scores[0].device, torch.float32,
                                                image_size=batch_input_shape)

    # ----------------------------------------------------------------- training
    def loss(self, feats: Sequence[Tensor], data_samples: Sequence[Any]) -> dict[str, Tensor]:
        """``loss_rpn_cls`` and ``loss_rpn_bbox`` of the batch (see :meth:`loss_by_feat`)."""
        return self.loss_by_feat(*self(feats), data_samples)

    def loss_and_predict(self, feats: Sequence[Tensor], data_samples: Sequence[Any],
                         proposal_cfg: dict[str, Any] | None = None) -> tuple[dict[str, Tensor], list[InstanceData]]:
        """Losses and (detached) proposals from one forward pass; ``proposal_cfg`` is mmdet's
        ``train_cfg.rpn_proposal`` (default: ``test_cfg``)."""
        cls_scores, bbox_preds = self(feats)
        losses = self.loss_by_feat(cls_scores, bbox_preds, data_samples)
        cfg = self.test_cfg if proposal_cfg is None else check_proposal_cfg(proposal_cfg, "proposal_cfg")
        proposals = self.predict_by_feat(cls_scores, bbox_preds, [s.metainfo for s in data_samples], cfg)
        return losses, proposals

    def _targets(self, anchors: Tensor, data_samples: Sequence[Any], featmap_sizes: list[tuple[int, int]]
                 ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        """Sampled anchors of every image: (positive image ids [P], positive anchor ids [P], their encoded
        targets [P, 4], negative image ids [Q], negative anchor ids [Q]); anchor ids index the concatenated
        anchors of all levels."""
        device = anchors.device
        pos_img, pos_idx, targets, neg_img, neg_idx = [], [], [], [], []
        for i, sample in enumerate(data_samples):
            img_shape = _img_hw(sample.metainfo)
            gt = sample.gt_instances if "gt_instances" in sample else None
            has_gt = gt is not None and "bboxes" in gt
            gt_bboxes = torch.as_tensor(gt.bboxes, device=device).float().reshape(-1, 4) if has_gt else \
                anchors.new_zeros((0, 4))
            ign = sample.ignored_instances if "ignored_instances" in sample else None
            ignore = torch.as_tensor(ign.bboxes, device=device).float().reshape(-1, 4) \
                if ign is not None and "bboxes" in ign else None
            valid = torch.cat(self.prior_generator.valid_flags(featmap_sizes, img_shape, device))
            inside = torch.nonzero(
                anchor_inside_flags(anchors, valid, img_shape, self.train_cfg["allowed_border"])
            ).flatten()
            priors = anchors[inside]
            gt_labels = torch.zeros(len(gt_bboxes), dtype=torch.long, device=device)  # one class: object
            assign = self.assigner.assign(priors, gt_bboxes, gt_labels, ignore)
            sampled = self.sampler.sample(assign, priors, gt_bboxes, gt_labels)
            pos, neg = inside[sampled.pos_inds], inside[sampled.neg_inds]
            pos_img.append(torch.full_like(pos, i))
            neg_img.append(torch.full_like(neg, i))
            pos_idx.append(pos)
            neg_idx.append(neg)
            targets.append(self.bbox_coder.encode(sampled.pos_priors, sampled.pos_gt_bboxes))
        return torch.cat(pos_img), torch.cat(pos_idx), torch.cat(targets), torch.cat(neg_img), torch.cat(neg_idx)

    def loss_by_feat(self, cls_scores: Sequence[Tensor], bbox_preds: Sequence[Tensor], data_samples: Sequence[Any]
                     ) -> dict[str, Tensor]:
        """Objectness loss on the sampled anchors (1 for positives, 0 for negatives) and box loss on the deltas of
        the positives, both divided by the number of sampled anchors of the batch (mmdet's ``avg_factor``).

        An image without gt boxes contributes only negatives; a batch without any gives a zero box loss that
        still has a gradient.
        """
        if self.train_cfg is None:
            raise ValueError("RPNHead: built without train_cfg (inference only); mode='loss' needs the model's "
                             "train_cfg.rpn")
        num_imgs = cls_scores[0].shape[0]
        if len(data_samples) != num_imgs:
            raise ValueError(f"RPNHead: {num_imgs} images but {len(data_samples)} data samples")
        featmap_sizes = [(int(c.shape[-2]), int(c.shape[-1])) for c in cls_scores]
        batch_shape = data_samples[0].metainfo.get("batch_input_shape")
        anchors = torch.cat(self._anchors(cls_scores, batch_shape))
        logits, deltas = self._flatten(cls_scores, bbox_preds)
        if logits.shape[1] != anchors.shape[0]:
            raise ValueError(
                f"RPNHead: the outputs hold {logits.shape[1]} anchors per image, the anchor generator made "
                f"{anchors.shape[0]}; A per position must be {self.num_anchors}"
            )
        with torch.no_grad():
            pos_img, pos_idx, targets, neg_img, neg_idx = self._targets(anchors, data_samples, featmap_sizes)
        num_pos, num_sampled = pos_idx.numel(), pos_idx.numel() + neg_idx.numel()
        pred = torch.cat([logits[pos_img, pos_idx], logits[neg_img, neg_idx]])
        labels = torch.cat([pred.new_ones(num_pos, dtype=torch.float32),
                            pred.new_zeros(num_sampled - num_pos, dtype=torch.float32)])
        pos_weight = float(self.train_cfg["pos_weight"])
        weight = None
        if pos_weight > 0:
            weight = torch.cat([labels.new_full((num_pos,), pos_weight), labels.new_ones(num_sampled - num_pos)])
        avg = float(max(num_sampled, 1))
        loss_cls = self.loss_cls(pred, labels, weight, avg_factor=avg)
        loss_bbox = self.loss_bbox(deltas[pos_img, pos_idx], targets, avg_factor=avg)
        return dict(loss_rpn_cls=loss_cls, loss_rpn_bbox=loss_bbox)

    # ----------------------------------------------------------------- proposals
    def predict(self, feats: Sequence[Tensor], data_samples: Sequence[Any], rescale: bool = False
                ) -> list[InstanceData]:
        """Proposals per image with ``test_cfg`` (pipeline pixels; original pixels when ``rescale``)."""
        cls_scores, bbox_preds = self(feats)
        return self.predict_by_feat(cls_scores, bbox_preds, [s.metainfo for s in data_samples], self.test_cfg,
                                    rescale=rescale)

    def _topk_decode(self, cls_scores: Sequence[Tensor], bbox_preds: Sequence[Tensor], nms_pre: int,
                     img_shapes: Tensor, batch_input_shape: Sequence[int] | None) -> tuple[Tensor, Tensor, Tensor]:
        """The ``nms_pre`` best anchors of each level, decoded and clipped, for the whole batch at once.

        Args:
            cls_scores, bbox_preds: the head's outputs (see :meth:`forward`).
            nms_pre: anchors kept per level.
            img_shapes: ``[B, 2]`` or ``[1, 2]`` float32 (H, W) each image's boxes are clipped to.
            batch_input_shape: (H, W) of the padded batch (for the anchor generator's ``strides_from_image``).

        Returns:
            boxes ``[B, P, 4]`` float32, sigmoid scores ``[B, P]`` float32 and the level of each column
            ``[P]`` int64, with ``P = sum_l min(nms_pre, H_l * W_l * A)``, levels in order, best first in each.
        """
        device = cls_scores[0].device
        with torch.autocast(device.type, enabled=False):
            anchors = self._anchors(cls_scores, batch_input_shape)
            boxes, scores, levels = [], [], []
            for lvl, (cls, reg, anc) in enumerate(zip(cls_scores, bbox_preds, anchors)):
                b = cls.shape[0]
                logits = cls.detach().float().permute(0, 2, 3, 1).reshape(b, -1)
                d = reg.detach().float().permute(0, 2, 3, 1).reshape(b, -1, 4)
                k = min(nms_pre, logits.shape[1])
                # Top-k on the logits, sigmoid after (torchvision's order): sigmoid saturates to 1.0 in float32
                # above ~17, and a top-k among tied scores would pick arbitrary anchors.
                logits, idx = logits.topk(k, dim=1)  # [B, k], sorted
                s = logits.sigmoid()
                d = d.gather(1, idx[..., None].expand(-1, -1, 4))
                boxes.append(self.bbox_coder.decode(anc[idx], d, max_shape=None))
                scores.append(s)
                levels.append(torch.full((k,), lvl, dtype=torch.long, device=device))
            boxes_t = torch.cat(boxes, dim=1)
            if getattr(self.bbox_coder, "clip_border", True):
                # Per-image bounds (a batch mixes image sizes); the same clamp as the coder's max_shape.
                hw = img_shapes.to(device=device, dtype=torch.float32)
                bounds = torch.stack([hw[:, 1], hw[:, 0], hw[:, 1], hw[:, 0]], dim=-1)[:, None, :]
                boxes_t = torch.minimum(boxes_t.clamp(min=0), bounds)
        return boxes_t, torch.cat(scores, dim=1), torch.cat(levels)

    def proposals_padded(self, cls_scores: Sequence[Tensor], bbox_preds: Sequence[Tensor], img_hw: Tensor,
                         batch_input_shape: Sequence[int] | None, cfg: dict[str, Any] | None = None
                         ) -> tuple[Tensor, Tensor, Tensor]:
        """The proposals with shapes that depend only on the input size: the one implementation that eager
        inference, training's proposals and the exported graph share (only ``oars::nms`` differs: torchvision's
        ``batched_nms`` eagerly, ONNX ``NonMaxSuppression`` exported).

        Per level the ``nms_pre`` best anchors (top-k on the logits, sigmoid after), decoded and clipped to each
        image's ``img_hw``; boxes not wider and higher than ``min_bbox_size`` scored 0 (they keep their slot);
        NMS per level as ONE ``oars::nms`` with the levels as its classes (scores ``[B, L, P]``, 0 outside the
        level: exact per-level NMS without coordinate offsets; score > 0 takes part); the ``max_per_img`` best.

        Args:
            cls_scores, bbox_preds: the head's outputs (see :meth:`forward`).
            img_hw: float32 ``[B or 1, 2]``: (H, W) of each image before batch padding (boxes are clipped to it).
            batch_input_shape: (H, W) of the padded batch (the anchors of ``strides_from_image`` generators).
            cfg: a proposal config (:func:`check_proposal_cfg`; default ``test_cfg``).

        Returns:
            boxes ``[B, K, 4]`` float32, scores ``[B, K]`` float32 and ``valid [B, K]`` bool (False: a row NMS
            removed), ``K = min(max_per_img, P)``, ``P = sum_l min(nms_pre, H_l * W_l * A)``; rows by decreasing
            score, the valid ones first.
        """
        cfg = self.test_cfg if cfg is None else cfg
        device = cls_scores[0].device
        with torch.autocast(device.type, enabled=False):
            boxes, scores, levels = self._topk_decode(cls_scores, bbox_preds, int(cfg["nms_pre"]), img_hw,
                                                      batch_input_shape)
            min_size = float(cfg["min_bbox_size"])
            big = ((boxes[..., 2] - boxes[..., 0]) > min_size) & ((boxes[..., 3] - boxes[..., 1]) > min_size)
            scores = torch.where(big, scores, torch.zeros_like(scores))
            per_level = [min(int(cfg["nms_pre"]), int(c.shape[1] * c.shape[2] * c.shape[3])) for c in cls_scores]
            level_ids = torch.arange(len(cls_scores), device=device)
            in_level = (levels[None, :] == level_ids[:, None])[None]  # [1, L, P]
            level_scores = torch.where(in_level, scores[:, None, :], torch.zeros_like(scores[:, None, :]))
            max_out = min(int(cfg["max_per_img"]), max(per_level))
            selected = torch.ops.oars.nms(boxes, level_scores, max_out, float(cfg["nms"]["iou_threshold"]), 0.0)
            kept = torch.zeros_like(level_scores).index_put(
                (selected[:, 0], selected[:, 1], selected[:, 2]), torch.ones_like(selected[:, 0], dtype=scores.dtype)
            ).sum(dim=1)  # [B, P]: each column belongs to one level
            k = min(int(cfg["max_per_img"]), scores.shape[1])
            top, idx = (scores * kept).topk(k, dim=1)
        return boxes.gather(1, idx[..., None].expand(-1, -1, 4)), top, top > 0

    def predict_by_feat(self, cls_scores: Sequence[Tensor], bbox_preds: Sequence[Tensor],
                        batch_img_metas: Sequence[dict[str, Any]], cfg: dict[str, Any] | None = None,
                        rescale: bool = False) -> list[InstanceData]:
        """Proposals of each image (MMDetection's / torchvision's RPN post-processing), no gradient, float32:
        :meth:`proposals_padded`'s valid rows.

        Returns:
            one ``InstanceData`` per image: ``bboxes [P, 4]`` float32 xyxy (pipeline pixels, or original pixels
            with ``rescale``), ``scores [P]`` float32 sorted descending, ``labels [P]`` int64 zeros.
        """
        cfg = self.test_cfg if cfg is None else cfg
        if len(batch_img_metas) != cls_scores[0].shape[0]:
            raise ValueError(f"RPNHead: {cls_scores[0].shape[0]} images but {len(batch_img_metas)} image metas")
        device = cls_scores[0].device
        img_shapes = torch.tensor([_img_hw(m) for m in batch_img_metas], dtype=torch.float32, device=device)
        with torch.no_grad():
            boxes, scores, valid = self.proposals_padded(cls_scores, bbox_preds, img_shapes,
                                                         batch_img_metas[0].get("batch_input_shape"), cfg)
        results = []
        for i, meta in enumerate(batch_img_metas):
            b, s = boxes[i][valid[i]], scores[i][valid[i]]
            if rescale:
                sw, sh = meta.get("scale_factor", (1.0, 1.0))[:2]
                b = b / b.new_tensor([sw, sh, sw, sh])
            results.append(InstanceData(bboxes=b, scores=s, labels=torch.zeros(len(s), dtype=torch.long,
                                                                               device=device)))
        return results
