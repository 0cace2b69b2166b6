"""The second stage of Faster / Mask R-CNN: sample the RPN's proposals against the ground truth, pool RoI
features, classify and refine boxes (and predict masks) — MMDetection's ``StandardRoIHead``.

``train_cfg`` is MMDetection's ``train_cfg.rcnn`` and ``test_cfg`` its ``test_cfg.rcnn`` (keys:
:mod:`.rcnn_config`); their values, like every head's, are in the base model YAML files
(``configs/_base_/models/*rcnn*.yaml``), not in code. Every image's sampled RoIs go through the box head in one
batched forward; inference is :mod:`.two_stage_infer` (shared with the export).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from mmengine.structures import InstanceData
from torch import Tensor, nn

from detection.registry import MODELS, TASK_UTILS
from oars.models.building import check_num_classes

from ..task_utils import SamplingResult
from .bbox_heads import sampled_priors
from .rcnn_config import check_test_cfg, check_train_cfg
from .two_stage_infer import detect_padded, image_hw, pad_proposals, results_from_padded
from .utils import bbox2roi, gt_fields

__all__ = ["RoIHeadBase", "StandardRoIHead", "check_test_cfg", "check_train_cfg"]

# Levels the RoI extractor pools from when its featmap_strides are not given: P2-P5, as MMDetection and
# torchvision (P6 is the RPN's only).
MAX_ROI_LEVELS = 4
# Tensor mode runs the mask head on the first RoIs only (MMDetection's forward does the same).
TENSOR_MODE_MASK_ROIS = 100


class RoIHeadBase(nn.Module):
    """Construction shared by :class:`StandardRoIHead` and the Cascade head: builds extractors and heads with
    the channels, strides, RoI sizes and ``num_classes`` inferred (a value in the config still wins)."""

    def __init__(self, num_classes: int, in_channels: int | Sequence[int], strides: Sequence[int] | None) -> None:
        super().__init__()
        name = type(self).__name__
        check_num_classes(name, num_classes)
        self.num_classes = num_classes
        self.feat_channels = [in_channels] if isinstance(in_channels, int) else [int(c) for c in in_channels]
        self.feat_strides = None if strides is None else [int(s) for s in strides]

    def _build_extractor(self, cfg: dict[str, Any], what: str) -> nn.Module:
        if not isinstance(cfg, dict) or "type" not in cfg:
            raise ValueError(f"{type(self).__name__}: {what} must be a config dict with a 'type' key (the base model "
                             f"YAML states it), got {cfg!r}")
        cfg = dict(cfg)
        strides = cfg.get("featmap_strides")
        if strides is None:
            if self.feat_strides is None:
                raise ValueError(f"{type(self).__name__}: {what}.featmap_strides is not set and no strides were given "
                                 "(the detector passes the neck's)")
            strides = self.feat_strides[:MAX_ROI_LEVELS]
        num = len(strides)
        if len(self.feat_channels) < num or len(set(self.feat_channels[:num])) != 1:
            raise ValueError(
                f"{type(self).__name__}: {what} pools from {num} levels (featmap_strides={list(strides)}) which must "
                f"all have the same channels; the features have {self.feat_channels}"
            )
        return MODELS.build(cfg, default_args=dict(out_channels=self.feat_channels[0], featmap_strides=strides))

    def _build_head(self, cfg: dict[str, Any], what: str, in_channels: int, roi_feat_size: int) -> nn.Module:
        if not isinstance(cfg, dict) or "type" not in cfg:
            raise ValueError(f"{type(self).__name__}: {what} must be a config dict with a 'type' key, got {cfg!r}")
        if cfg.get("num_classes", self.num_classes) != self.num_classes:
            raise ValueError(f"{type(self).__name__}: {what}.num_classes={cfg['num_classes']} differs from the "
                             f"model's num_classes={self.num_classes}; set num_classes only on the model")
        return MODELS.build(cfg, default_args=dict(num_classes=self.num_classes, in_channels=in_channels,
                                                   roi_feat_size=roi_feat_size))

    def _build_shared_head(self, cfg: dict[str, Any] | None, extractor: nn.Module) -> nn.Module | None:
        if cfg is None:
            return None
        return MODELS.build(cfg, default_args=dict(in_channels=extractor.out_channels))

    @staticmethod
    def _head_input(extractor: nn.Module, shared_head: nn.Module | None) -> tuple[int, int]:
        """(channels, spatial size) of the features a head after ``extractor`` (and ``shared_head``) receives."""
        size = extractor.output_size[0]
        if shared_head is None:
            return extractor.out_channels, size
        stride = getattr(shared_head, "stride", 1)
        return shared_head.out_channels, -(-size // stride)

    def init_weights(self) -> None:
        """Initialise every child that has ``init_weights`` (heads, the pretrained shared head); mmengine's
        ``BaseModule.init_weights`` reaches this module but not its children."""
        for m in self.children():
            fn = getattr(m, "init_weights", None)
            if fn is not None:
                fn()
            elif isinstance(m, nn.ModuleList):
                for sub in m:
                    if hasattr(sub, "init_weights"):
                        sub.init_weights()

    def _check_trainable(self) -> None:
        if self.train_cfg is None:
            raise ValueError(f"{type(self).__name__}: built without train_cfg (inference only); mode='loss' needs "
                             "the model's train_cfg.rcnn")

    @staticmethod
    def assign_and_sample(
        assigner: Any, sampler: Any, proposals: Sequence[InstanceData], gts: Sequence[InstanceData],
        ignores: Sequence[Tensor | None],
    ) -> list[SamplingResult]:
        """Per image: assign the proposals to the gt boxes, then sample (adding the gts as proposals)."""
        results = []
        for props, gt, ignore in zip(proposals, gts, ignores):
            priors = props.bboxes[:, :4].detach().float()
            assign = assigner.assign(priors, gt.bboxes.float(), gt.labels.long(), ignore)
            results.append(sampler.sample(assign, priors, gt.bboxes.float(), gt.labels.long()))
        return results

    # ----------------------------------------------------------------- inference (two_stage_infer)
    def box_stages(self) -> list[tuple[nn.Module, nn.Module | None, nn.Module]]:  # pragma: no cover
        """(extractor, shared head or None, box head) of each stage, in order."""
        raise NotImplementedError

    def mask_stages(self) -> list[tuple[nn.Module, nn.Module | None, nn.Module]]:  # pragma: no cover
        """(extractor, shared head or None, mask head) of the stages whose mask probabilities are averaged."""
        raise NotImplementedError

    def combine_scores(self, stage_scores: list[Tensor]) -> Tensor:  # pragma: no cover
        """The box stages' classifier logits ``[R, C + 1]`` -> class probabilities ``[R, C + 1]`` float32."""
        raise NotImplementedError

    def predict_padded(self, feats: Sequence[Tensor], proposals: Tensor, valid: Tensor, img_hw: Tensor,
                       static: bool = False) -> tuple[Tensor, ...]:
        """Padded detections of padded proposals (:func:`two_stage_infer.detect_padded`: the one implementation
        that the eager :meth:`predict` and the exported graph share).

        Args:
            feats: the neck's maps ``[B, C, H_l, W_l]``.
            proposals: ``[B, K, 4]`` float32 in input pixels; valid: ``[B, K]`` bool.
            img_hw: float32 ``[B or 1, 2]`` (H, W) each image's boxes are clipped to.
            static: the export's form (RoIAlign as per-level ``where``, masks of every row).

        Returns:
            ``num_dets [B]``, ``boxes [B, M, 4]``, ``scores [B, M]``, ``labels [B, M]`` (``LABEL_PAD`` in padding
            rows)[, ``masks [B, M, h, w]`` probabilities].
        """
        return detect_padded(self, feats, proposals, valid, img_hw, static)

    def predict(self, feats: Sequence[Tensor], proposals: Sequence[InstanceData], data_samples: Sequence[Any],
                rescale: bool = True) -> list[InstanceData]:
        """Detections per image: ``bboxes [K, 4]``, ``scores [K]``, ``labels [K]`` int64 (and ``masks`` bool
        ``[K, H, W]``), by decreasing score, in original image pixels when ``rescale`` (input pixels otherwise).

        Args:
            feats: the neck's maps ``[B, C, H_l, W_l]``.
            proposals: per image ``InstanceData(bboxes [P_i, 4])`` in input pixels.
            data_samples: per image, metainfo with ``img_shape`` (and ``scale_factor``, ``ori_shape`` for
                ``rescale``).
        """
        metas = [s.metainfo for s in data_samples]
        boxes, valid = pad_proposals(proposals)
        outs = self.predict_padded(feats, boxes, valid, image_hw(metas, boxes.device))
        return results_from_padded(self, outs, metas, rescale)


@MODELS.register_module()
class StandardRoIHead(RoIHeadBase):
    """Faster R-CNN / Mask R-CNN RoI head.

    Args:
        num_classes: foreground classes (given by the detector).
        in_channels: channels of the feature maps (the neck's ``out_channels``; given by the detector).
        strides: strides of the feature maps (the neck's ``out_strides``; given by the detector). The box
            extractor pools from the first four (P2-P5) unless its ``featmap_strides`` says otherwise.
        bbox_roi_extractor: MODELS config (Faster R-CNN FPN: ``SingleRoIExtractor``, RoIAlign 7x7, sampling_ratio
            0, aligned).
        bbox_head: MODELS config (Faster R-CNN FPN: ``Shared2FCBBoxHead``, 1024-d).
        test_cfg: :func:`.rcnn_config.check_test_cfg` (Faster R-CNN: ``score_thr`` 0.05, ``nms: {iou_threshold:
            0.5}``, ``max_per_img`` 100, ``nms_pre`` 10000 (RoI, class) pairs enter NMS at most: with ``score_thr``
            0.05 no more than 19 per RoI pass anyway; torchvision: -1, all, and ``min_bbox_size`` 0.01).
        train_cfg: :func:`.rcnn_config.check_train_cfg` (``assigner``, ``sampler``, ``pos_weight``, and
            ``mask_size`` with a mask head); None: inference only.
        mask_roi_extractor: MODELS config (Mask R-CNN FPN: RoIAlign 14x14); None with a ``mask_head``: the box
            extractor (and shared head) are shared, the mask head sees the box head's RoI features (C4).
        mask_head: MODELS config (``FCNMaskHead``), None for a box-only detector.
        shared_head: MODELS config run on the RoI features before the heads (``ResLayer`` for C4), or None.

    The values of every shipped config are in the base model YAML files (``configs/_base_/models/*rcnn*.yaml``).
    """

    def __init__(
        self,
        num_classes: int,
        in_channels: int | Sequence[int],
        bbox_roi_extractor: dict[str, Any],
        bbox_head: dict[str, Any],
        test_cfg: dict[str, Any],
        train_cfg: dict[str, Any] | None = None,
        strides: Sequence[int] | None = None,
        mask_roi_extractor: dict[str, Any] | None = None,
        mask_head: dict[str, Any] | None = None,
        shared_head: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(num_classes, in_channels, strides)
        name = type(self).__name__
        self.train_cfg = check_train_cfg(name, train_cfg, mask_head is not None)
        self.test_cfg = check_test_cfg(name, test_cfg, mask_head is not None)
        self.bbox_roi_extractor = self._build_extractor(bbox_roi_extractor, "bbox_roi_extractor")
        self.shared_head = self._build_shared_head(shared_head, self.bbox_roi_extractor)
        channels, size = self._head_input(self.bbox_roi_extractor, self.shared_head)
        self.bbox_head = self._build_head(bbox_head, "bbox_head", channels, size)
        self.share_roi_extractor = mask_head is not None and mask_roi_extractor is None
        self.mask_roi_extractor = None
        self.mask_head = None
        if mask_head is not None:
            if self.share_roi_extractor:
                m_channels, m_size = channels, size
            else:
                self.mask_roi_extractor = self._build_extractor(mask_roi_extractor, "mask_roi_extractor")
                m_channels, m_size = self._head_input(self.mask_roi_extractor, self.shared_head)
            self.mask_head = self._build_head(mask_head, "mask_head", m_channels, m_size)
            if self.train_cfg is not None and self.mask_head.mask_size != self.train_cfg["mask_size"]:
                raise ValueError(
                    f"{name}: train_cfg.mask_size={self.train_cfg['mask_size']} but the mask head predicts "
                    f"{self.mask_head.mask_size}x{self.mask_head.mask_size} masks (twice its RoI size)"
                )
        trainable = self.train_cfg is not None
        self.bbox_assigner = TASK_UTILS.build(self.train_cfg["assigner"]) if trainable else None
        self.bbox_sampler = TASK_UTILS.build(self.train_cfg["sampler"]) if trainable else None

    @property
    def with_mask(self) -> bool:
        return self.mask_head is not None

    @property
    def with_shared_head(self) -> bool:
        return self.shared_head is not None

    # ----------------------------------------------------------------- forwards
    def _bbox_forward(self, feats: Sequence[Tensor], rois: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``(cls_score, bbox_pred, bbox_feats)`` of ``rois [R, 5]`` (``bbox_feats`` after the shared head)."""
        bbox_feats = self.bbox_roi_extractor(feats, rois)
        if self.shared_head is not None:
            bbox_feats = self.shared_head(bbox_feats)
        cls_score, bbox_pred = self.bbox_head(bbox_feats)
        return cls_score, bbox_pred, bbox_feats

    def _mask_forward(self, feats: Sequence[Tensor], rois: Tensor) -> Tensor:
        """Mask logits ``[R, C, 28, 28]`` of ``rois [R, 5]``."""
        extractor = self.bbox_roi_extractor if self.share_roi_extractor else self.mask_roi_extractor
        mask_feats = extractor(feats, rois)
        if self.shared_head is not None:
            mask_feats = self.shared_head(mask_feats)
        return self.mask_head(mask_feats)

    def forward(self, feats: Sequence[Tensor], rois: Tensor) -> tuple[Tensor, ...]:
        """Tensor mode: ``(cls_score [R, C + 1], bbox_pred [R, reg_dim])`` and, with a mask head, the mask logits
        of the first 100 RoIs ``[min(R, 100), C, 28, 28]``."""
        cls_score, bbox_pred, _ = self._bbox_forward(feats, rois)
        if not self.with_mask:
            return cls_score, bbox_pred
        return cls_score, bbox_pred, self._mask_forward(feats, rois[:TENSOR_MODE_MASK_ROIS])

    # ----------------------------------------------------------------- training
    def loss(self, feats: Sequence[Tensor], proposals: Sequence[InstanceData], data_samples: Sequence[Any]
             ) -> dict[str, Tensor]:
        """``loss_cls``, ``loss_bbox``, ``acc`` (and ``loss_mask``) of one batch.

        Args:
            feats: the neck's maps ``[B, C, H_l, W_l]``.
            proposals: per image the RPN's ``InstanceData(bboxes [P_i, 4], ...)`` in input pixels (detached here).
            data_samples: per image, with ``gt_instances`` (``bboxes``, ``labels``, and ``masks`` for a mask head)
                and optionally ``ignored_instances``.
        """
        self._check_trainable()
        if len(proposals) != len(data_samples):
            raise ValueError(f"{type(self).__name__}: {len(proposals)} proposal lists for {len(data_samples)} images")
        gts, ignores = gt_fields(data_samples, feats[0].device, self.num_classes, type(self).__name__)
        sampling = self.assign_and_sample(self.bbox_assigner, self.bbox_sampler, proposals, gts, ignores)
        losses, _ = self.bbox_and_mask_loss(feats, sampling, gts)
        return losses

    def bbox_and_mask_loss(
        self, feats: Sequence[Tensor], sampling: Sequence[SamplingResult], gts: Sequence[InstanceData],
    ) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        """Losses of sampled RoIs, and the box outputs (``rois``, ``cls_score``, ``bbox_pred``, ``labels``)."""
        rois = bbox2roi(sampled_priors(sampling))
        cls_score, bbox_pred, bbox_feats = self._bbox_forward(feats, rois)
        targets = self.bbox_head.get_targets(sampling, self.train_cfg["pos_weight"])
        losses = self.bbox_head.loss(cls_score, bbox_pred, rois, *targets)
        if self.with_mask:
            losses.update(self._mask_loss(feats, sampling, gts, bbox_feats))
        return losses, dict(rois=rois, cls_score=cls_score, bbox_pred=bbox_pred, labels=targets[0])

    def _mask_loss(self, feats: Sequence[Tensor], sampling: Sequence[SamplingResult], gts: Sequence[InstanceData],
                   bbox_feats: Tensor) -> dict[str, Tensor]:
        if self.share_roi_extractor:
            # The box head's features of the positives (each image's sampled RoIs start with its positives).
            is_pos = torch.cat([torch.arange(r.pos_inds.numel() + r.neg_inds.numel(), device=bbox_feats.device)
                                < r.pos_inds.numel() for r in sampling])
            mask_logits = self.mask_head(bbox_feats[is_pos])
        else:
            mask_logits = self._mask_forward(feats, bbox2roi([r.pos_priors for r in sampling]))
        targets = self.mask_head.get_targets(sampling, gts)
        labels = torch.cat([r.pos_gt_labels for r in sampling]).long()
        return self.mask_head.loss(mask_logits, targets, labels)

    # ----------------------------------------------------------------- inference
    def box_stages(self) -> list[tuple[nn.Module, nn.Module | None, nn.Module]]:
        return [(self.bbox_roi_extractor, self.shared_head, self.bbox_head)]

    def mask_stages(self) -> list[tuple[nn.Module, nn.Module | None, nn.Module]]:
        extractor = self.bbox_roi_extractor if self.share_roi_extractor else self.mask_roi_extractor
        return [(extractor, self.shared_head, self.mask_head)]

    def combine_scores(self, stage_scores: list[Tensor]) -> Tensor:
        return F.softmax(stage_scores[0].float(), dim=-1)
