"""The second stage of Faster / Mask R-CNN: sample the RPN's proposals against the ground truth, pool RoI
features, classify and refine boxes (and predict masks) — MMDetection's ``StandardRoIHead``.

``train_cfg`` is MMDetection's ``train_cfg.rcnn`` and ``test_cfg`` its ``test_cfg.rcnn``; missing keys take
MMDetection's Faster/Mask R-CNN values (``TRAIN_CFG_DEFAULTS`` / ``TEST_CFG_DEFAULTS``). Every image's sampled
RoIs go through the box head in one batched forward.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from mmengine.structures import InstanceData
from torch import Tensor, nn

from detection.registry import MODELS, TASK_UTILS
from oars.models.building import check_num_classes

from ..task_utils import SamplingResult
from .bbox_heads import sampled_priors
from .utils import bbox2roi, check_keys, empty_instances, gt_fields

DEFAULT_BBOX_ROI_EXTRACTOR: dict[str, Any] = dict(
    type="SingleRoIExtractor", roi_layer=dict(type="RoIAlign", output_size=7, sampling_ratio=0, aligned=True)
)
DEFAULT_BBOX_HEAD: dict[str, Any] = dict(type="Shared2FCBBoxHead", fc_out_channels=1024)
TRAIN_CFG_DEFAULTS: dict[str, Any] = dict(
    assigner=dict(type="MaxIoUAssigner", pos_iou_thr=0.5, neg_iou_thr=0.5, min_pos_iou=0.5, match_low_quality=False,
                  ignore_iof_thr=-1),
    sampler=dict(type="RandomSampler", num=512, pos_fraction=0.25, neg_pos_ub=-1, add_gt_as_proposals=True),
    mask_size=28,
    pos_weight=-1,
)
TEST_CFG_DEFAULTS: dict[str, Any] = dict(
    score_thr=0.05, nms=dict(iou_threshold=0.5), max_per_img=100, nms_pre=10000, mask_thr_binary=0.5,
    min_bbox_size=0.0,
)
# Levels the RoI extractor pools from by default: P2-P5, as MMDetection and torchvision (P6 is the RPN's only).
MAX_ROI_LEVELS = 4
# Tensor mode runs the mask head on the first RoIs only (MMDetection's forward does the same).
TENSOR_MODE_MASK_ROIS = 100


def check_test_cfg(owner: str, test_cfg: dict[str, Any] | None) -> dict[str, Any]:
    """``test_cfg`` (mmdet's ``test_cfg.rcnn``) with defaults, validated."""
    cfg = check_keys(f"{owner} test_cfg", test_cfg, TEST_CFG_DEFAULTS)
    nms = dict(cfg["nms"] or {})
    if sorted(set(nms) - {"iou_threshold", "type"}) or nms.get("type", "nms") != "nms":
        raise ValueError(f"{owner}: test_cfg.nms={nms} is invalid; expected {{iou_threshold: 0.5}} (type: nms)")
    nms.setdefault("iou_threshold", 0.5)
    cfg["nms"] = nms
    if not 0 <= float(cfg["score_thr"]) < 1:
        raise ValueError(f"{owner}: test_cfg.score_thr must be in [0, 1), got {cfg['score_thr']!r}")
    if not 0 < float(nms["iou_threshold"]) <= 1:
        raise ValueError(f"{owner}: test_cfg.nms.iou_threshold must be in (0, 1], got {nms['iou_threshold']!r}")
    if not 0 <= float(cfg["mask_thr_binary"]) <= 1:
        raise ValueError(f"{owner}: test_cfg.mask_thr_binary must be in [0, 1], got {cfg['mask_thr_binary']!r}")
    if float(cfg["min_bbox_size"]) < 0:
        raise ValueError(f"{owner}: test_cfg.min_bbox_size must be >= 0, got {cfg['min_bbox_size']!r}")
    if not isinstance(cfg["max_per_img"], int):
        raise ValueError(f"{owner}: test_cfg.max_per_img must be an int, got {cfg['max_per_img']!r}")
    return cfg


def check_train_cfg(owner: str, train_cfg: dict[str, Any] | None) -> dict[str, Any]:
    """``train_cfg`` (mmdet's ``train_cfg.rcnn``, or one stage's) with defaults, validated."""
    cfg = check_keys(f"{owner} train_cfg", train_cfg, TRAIN_CFG_DEFAULTS)
    for key in ("assigner", "sampler"):
        if not isinstance(cfg[key], dict) or "type" not in cfg[key]:
            raise ValueError(f"{owner}: train_cfg.{key} must be a config dict with 'type', got {cfg[key]!r}")
    return cfg


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

    def _build_extractor(self, cfg: dict[str, Any] | None, what: str) -> nn.Module:
        cfg = dict(DEFAULT_BBOX_ROI_EXTRACTOR if cfg is None else cfg)
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

    def _mask_probs(self, feats: Sequence[Tensor], mask_rois: Tensor, labels: Tensor) -> Tensor:  # pragma: no cover
        raise NotImplementedError

    def predict_mask(self, feats: Sequence[Tensor], metas: Sequence[dict[str, Any]], results: list[InstanceData],
                     rescale: bool, mask_head: nn.Module) -> list[InstanceData]:
        """Add ``masks`` (pasted by ``mask_head``) to detections whose ``bboxes`` are in input pixels; with
        ``rescale`` the boxes and masks are returned in original pixels."""
        mask_rois = bbox2roi([r.bboxes for r in results])
        labels = torch.cat([r.labels for r in results])
        if mask_rois.shape[0]:
            probs = self._mask_probs(feats, mask_rois, labels)
        else:
            probs = mask_rois.new_zeros((0, mask_head.mask_size, mask_head.mask_size))
        return mask_head.predict_by_feat(
            probs.split([len(r) for r in results]), results, metas, self.test_cfg["mask_thr_binary"], rescale,
            probs_are_selected=True,
        )


@MODELS.register_module()
class StandardRoIHead(RoIHeadBase):
    """Faster R-CNN / Mask R-CNN RoI head.

    Args:
        num_classes: foreground classes (given by the detector).
        in_channels: channels of the feature maps (the neck's ``out_channels``; given by the detector).
        strides: strides of the feature maps (the neck's ``out_strides``; given by the detector). The box
            extractor pools from the first four (P2-P5) unless its ``featmap_strides`` says otherwise.
        bbox_roi_extractor: MODELS config (default ``SingleRoIExtractor``, RoIAlign 7x7, sampling_ratio 0,
            aligned).
        bbox_head: MODELS config (default ``Shared2FCBBoxHead``).
        mask_roi_extractor: MODELS config (Mask R-CNN FPN: RoIAlign 14x14); None with a ``mask_head``: the box
            extractor (and shared head) are shared, the mask head sees the box head's RoI features (C4).
        mask_head: MODELS config (``FCNMaskHead``), None for a box-only detector.
        shared_head: MODELS config run on the RoI features before the heads (``ResLayer`` for C4), or None.
        train_cfg: ``assigner``, ``sampler``, ``mask_size`` (28), ``pos_weight`` (-1: 1).
        test_cfg: ``score_thr`` (0.05), ``nms: {iou_threshold: 0.5}``, ``max_per_img`` (100), ``nms_pre``
            (10000 (RoI, class) pairs enter NMS at most; with ``score_thr`` 0.05 no more than 19 per RoI pass
            anyway; <= 0: all, as torchvision), ``mask_thr_binary`` (0.5), ``min_bbox_size`` (0: off; torchvision
            drops detections narrower or lower than 0.01 input pixels before NMS).
    """

    def __init__(
        self,
        num_classes: int,
        in_channels: int | Sequence[int],
        strides: Sequence[int] | None = None,
        bbox_roi_extractor: dict[str, Any] | None = None,
        bbox_head: dict[str, Any] | None = None,
        mask_roi_extractor: dict[str, Any] | None = None,
        mask_head: dict[str, Any] | None = None,
        shared_head: dict[str, Any] | None = None,
        train_cfg: dict[str, Any] | None = None,
        test_cfg: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(num_classes, in_channels, strides)
        name = type(self).__name__
        self.train_cfg = check_train_cfg(name, train_cfg)
        self.test_cfg = check_test_cfg(name, test_cfg)
        self.bbox_roi_extractor = self._build_extractor(bbox_roi_extractor, "bbox_roi_extractor")
        self.shared_head = self._build_shared_head(shared_head, self.bbox_roi_extractor)
        channels, size = self._head_input(self.bbox_roi_extractor, self.shared_head)
        self.bbox_head = self._build_head(dict(DEFAULT_BBOX_HEAD if bbox_head is None else bbox_head), "bbox_head",
                                          channels, size)
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
            if self.mask_head.mask_size != self.train_cfg["mask_size"]:
                raise ValueError(
                    f"{name}: train_cfg.mask_size={self.train_cfg['mask_size']} but the mask head predicts "
                    f"{self.mask_head.mask_size}x{self.mask_head.mask_size} masks (twice its RoI size)"
                )
        self.bbox_assigner = TASK_UTILS.build(self.train_cfg["assigner"])
        self.bbox_sampler = TASK_UTILS.build(self.train_cfg["sampler"])

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
    def predict(self, feats: Sequence[Tensor], proposals: Sequence[InstanceData], data_samples: Sequence[Any],
                rescale: bool = True) -> list[InstanceData]:
        """Detections per image: ``bboxes [K, 4]``, ``scores [K]``, ``labels [K]`` int64 (and ``masks`` bool
        ``[K, H, W]``), in original image pixels when ``rescale`` (input pixels otherwise)."""
        metas = [s.metainfo for s in data_samples]
        rois = bbox2roi([p.bboxes for p in proposals])
        counts = [len(p) for p in proposals]
        if rois.shape[0] == 0:
            results = [empty_instances(rois.device) for _ in metas]
        else:
            cls_score, bbox_pred, _ = self._bbox_forward(feats, rois)
            results = self.bbox_head.predict_by_feat(
                rois.split(counts), cls_score.split(counts), bbox_pred.split(counts), metas, self.test_cfg,
                rescale=rescale and not self.with_mask,
            )
        if self.with_mask:
            results = self.predict_mask(feats, metas, results, rescale, self.mask_head)
        return results

    def _mask_probs(self, feats: Sequence[Tensor], mask_rois: Tensor, labels: Tensor) -> Tensor:
        """Mask probabilities ``[K, h, w]`` of each RoI's class."""
        logits = self._mask_forward(feats, mask_rois)
        return self.mask_head._select(logits, labels).float().sigmoid()
