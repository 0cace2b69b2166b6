"""Cascade R-CNN (Cai & Vasconcelos 2018): a sequence of box heads, each trained at a higher IoU threshold on
the boxes the previous one refined — MMDetection's ``CascadeRoIHead`` (Cascade Mask R-CNN with a mask head
per stage).

Training: stage ``i`` assigns and samples its proposals with ``train_cfg[i]`` (IoU 0.5 / 0.6 / 0.7), its losses
are logged as ``s{i}.loss_*`` times ``stage_loss_weights[i]``; its sampled RoIs, moved by its regression
(detached, without the gt boxes the sampler added), are stage ``i + 1``'s proposals. Inference: every stage
refines the previous stage's boxes; the final boxes are the last stage's regression of the boxes it was given,
the scores a combination of all stages' classifiers (``score_combination``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from mmengine.structures import InstanceData
from torch import Tensor, nn

from detection.registry import MODELS, TASK_UTILS

from .bbox_heads import sampled_priors
from .standard_roi_head import TENSOR_MODE_MASK_ROIS, RoIHeadBase, check_test_cfg, check_train_cfg
from .utils import bbox2roi, empty_instances, gt_fields

SCORE_COMBINATIONS = ("logits", "probs")
MASK_COMBINATIONS = ("mean", "last")
STAGE_STDS = ([0.1, 0.1, 0.2, 0.2], [0.05, 0.05, 0.1, 0.1], [0.033, 0.033, 0.067, 0.067])
STAGE_IOUS = (0.5, 0.6, 0.7)


def default_cascade_bbox_heads() -> list[dict[str, Any]]:
    """MMDetection's three Cascade R-CNN box heads: class-agnostic ``Shared2FCBBoxHead`` with the stds of each
    stage, softmax cross-entropy and smooth L1 (beta 1)."""
    return [
        dict(type="Shared2FCBBoxHead", fc_out_channels=1024, reg_class_agnostic=True,
             bbox_coder=dict(type="DeltaXYWHBBoxCoder", target_means=[0.0] * 4, target_stds=list(stds)),
             loss_cls=dict(type="CrossEntropyLoss", use_sigmoid=False, loss_weight=1.0),
             loss_bbox=dict(type="SmoothL1Loss", beta=1.0, loss_weight=1.0))
        for stds in STAGE_STDS
    ]


def default_cascade_train_cfg() -> list[dict[str, Any]]:
    """MMDetection's ``train_cfg.rcnn`` of Cascade R-CNN: IoU 0.5 / 0.6 / 0.7, 512 RoIs, 25 % positives."""
    return [
        dict(assigner=dict(type="MaxIoUAssigner", pos_iou_thr=iou, neg_iou_thr=iou, min_pos_iou=iou,
                           match_low_quality=False, ignore_iof_thr=-1),
             sampler=dict(type="RandomSampler", num=512, pos_fraction=0.25, neg_pos_ub=-1, add_gt_as_proposals=True),
             mask_size=28, pos_weight=-1)
        for iou in STAGE_IOUS
    ]


def _per_stage(name: str, value: Any, num_stages: int) -> list[Any]:
    """A list of ``num_stages`` configs: a list as given (its length checked), a single dict repeated."""
    if isinstance(value, (list, tuple)):
        if len(value) != num_stages:
            raise ValueError(f"CascadeRoIHead: {name} has {len(value)} entries for num_stages={num_stages}")
        return list(value)
    return [value] * num_stages


@MODELS.register_module()
class CascadeRoIHead(RoIHeadBase):
    """Cascade (Mask) R-CNN RoI head.

    Args:
        num_classes, in_channels, strides: as :class:`StandardRoIHead` (given by the detector).
        num_stages: number of box heads (3).
        stage_loss_weights: weight of each stage's losses (``[1, 0.5, 0.25]``).
        bbox_roi_extractor: one MODELS config for every stage, or a list (default RoIAlign 7x7).
        bbox_head: list of ``num_stages`` MODELS configs (default :func:`default_cascade_bbox_heads`).
        mask_roi_extractor: one config or a list (RoIAlign 14x14 for Cascade Mask R-CNN); None with a mask head:
            the box extractors are used.
        mask_head: one config (repeated: a mask head per stage, as MMDetection) or a list; None: boxes only.
        score_combination: how inference combines the stages' classifiers: ``'logits'`` averages the stages'
            logits then applies softmax (MMDetection), ``'probs'`` averages their softmax probabilities
            (Detectron2).
        mask_combination: ``'mean'`` averages the mask probabilities of every stage's mask head on the final
            boxes (MMDetection); ``'last'`` uses the last stage's mask head only.
        train_cfg: list of ``num_stages`` stage configs (keys of :class:`StandardRoIHead`'s ``train_cfg``;
            default :func:`default_cascade_train_cfg`).
        test_cfg: as :class:`StandardRoIHead`.
    """

    def __init__(
        self,
        num_classes: int,
        in_channels: int | Sequence[int],
        strides: Sequence[int] | None = None,
        num_stages: int = 3,
        stage_loss_weights: Sequence[float] = (1.0, 0.5, 0.25),
        bbox_roi_extractor: dict[str, Any] | list[dict[str, Any]] | None = None,
        bbox_head: list[dict[str, Any]] | None = None,
        mask_roi_extractor: dict[str, Any] | list[dict[str, Any]] | None = None,
        mask_head: dict[str, Any] | list[dict[str, Any]] | None = None,
        score_combination: str = "logits",
        mask_combination: str = "mean",
        train_cfg: list[dict[str, Any]] | None = None,
        test_cfg: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(num_classes, in_channels, strides)
        if not isinstance(num_stages, int) or num_stages < 1:
            raise ValueError(f"CascadeRoIHead: num_stages must be an int >= 1, got {num_stages!r}")
        if len(stage_loss_weights) != num_stages:
            raise ValueError(f"CascadeRoIHead: stage_loss_weights={list(stage_loss_weights)} needs {num_stages} "
                             "entries (one per stage)")
        if score_combination not in SCORE_COMBINATIONS:
            raise ValueError(f"CascadeRoIHead: score_combination={score_combination!r} is invalid; accepted: "
                             f"{list(SCORE_COMBINATIONS)}")
        if mask_combination not in MASK_COMBINATIONS:
            raise ValueError(f"CascadeRoIHead: mask_combination={mask_combination!r} is invalid; accepted: "
                             f"{list(MASK_COMBINATIONS)}")
        if (bbox_head is None or train_cfg is None) and num_stages != len(STAGE_IOUS):
            raise ValueError(f"CascadeRoIHead: num_stages={num_stages} needs bbox_head and train_cfg lists (the "
                             f"defaults are MMDetection's {len(STAGE_IOUS)} stages)")
        if isinstance(train_cfg, dict):
            raise ValueError("CascadeRoIHead: train_cfg must be a list with one dict per stage (mmdet's "
                             "train_cfg.rcnn of Cascade R-CNN), got one dict")
        self.num_stages = num_stages
        self.stage_loss_weights = [float(w) for w in stage_loss_weights]
        self.score_combination = score_combination
        self.mask_combination = mask_combination
        train_cfgs = _per_stage("train_cfg", default_cascade_train_cfg() if train_cfg is None else train_cfg,
                                num_stages)
        self.train_cfg = [check_train_cfg(f"CascadeRoIHead stage {i}", c) for i, c in enumerate(train_cfgs)]
        self.test_cfg = check_test_cfg("CascadeRoIHead", test_cfg)

        if not isinstance(bbox_head, (list, tuple)) and bbox_head is not None:
            raise ValueError("CascadeRoIHead: bbox_head must be a list with one config per stage")
        head_cfgs = _per_stage("bbox_head", default_cascade_bbox_heads() if bbox_head is None else bbox_head,
                               num_stages)
        extractor_cfgs = _per_stage("bbox_roi_extractor", bbox_roi_extractor, num_stages)
        self.bbox_roi_extractor = nn.ModuleList(
            self._build_extractor(c, f"bbox_roi_extractor[{i}]") for i, c in enumerate(extractor_cfgs)
        )
        self.bbox_head = nn.ModuleList()
        for i, (cfg, ext) in enumerate(zip(head_cfgs, self.bbox_roi_extractor)):
            channels, size = self._head_input(ext, None)
            self.bbox_head.append(self._build_head(cfg, f"bbox_head[{i}]", channels, size))

        self.share_roi_extractor = mask_head is not None and mask_roi_extractor is None
        self.mask_roi_extractor: nn.ModuleList | None = None
        self.mask_head: nn.ModuleList | None = None
        if mask_head is not None:
            if self.share_roi_extractor:
                mask_extractors = self.bbox_roi_extractor
            else:
                mask_extractors = nn.ModuleList(
                    self._build_extractor(c, f"mask_roi_extractor[{i}]")
                    for i, c in enumerate(_per_stage("mask_roi_extractor", mask_roi_extractor, num_stages))
                )
                self.mask_roi_extractor = mask_extractors
            self.mask_head = nn.ModuleList()
            for i, (cfg, ext) in enumerate(zip(_per_stage("mask_head", mask_head, num_stages), mask_extractors)):
                channels, size = self._head_input(ext, None)
                head = self._build_head(cfg, f"mask_head[{i}]", channels, size)
                if head.mask_size != self.train_cfg[i]["mask_size"]:
                    raise ValueError(f"CascadeRoIHead: train_cfg[{i}].mask_size={self.train_cfg[i]['mask_size']} but "
                                     f"mask_head[{i}] predicts {head.mask_size}x{head.mask_size} masks")
                self.mask_head.append(head)
        self.bbox_assigner = [TASK_UTILS.build(c["assigner"]) for c in self.train_cfg]
        self.bbox_sampler = [TASK_UTILS.build(c["sampler"]) for c in self.train_cfg]

    @property
    def with_mask(self) -> bool:
        return self.mask_head is not None

    # ----------------------------------------------------------------- forwards
    def _bbox_forward(self, stage: int, feats: Sequence[Tensor], rois: Tensor) -> tuple[Tensor, Tensor]:
        return self.bbox_head[stage](self.bbox_roi_extractor[stage](feats, rois))

    def _mask_forward(self, stage: int, feats: Sequence[Tensor], rois: Tensor) -> Tensor:
        extractors = self.bbox_roi_extractor if self.share_roi_extractor else self.mask_roi_extractor
        return self.mask_head[stage](extractors[stage](feats, rois))

    def _refine_rois(self, stage: int, rois: Tensor, cls_score: Tensor, bbox_pred: Tensor,
                     metas: Sequence[dict[str, Any]] | None) -> Tensor:
        """Inference: every RoI moved by ``stage``'s regression of its best foreground class, clipped to its
        image's ``img_shape`` (not clipped when ``metas`` is None)."""
        labels = cls_score[:, :-1].argmax(dim=1)
        if metas is None:
            boxes = self.bbox_head[stage].regress_by_class(rois[:, 1:], labels, bbox_pred, None)
            return torch.cat([rois[:, :1], boxes], dim=1)
        img_idx = rois[:, 0].long()
        boxes = rois[:, 1:].clone()
        for i, meta in enumerate(metas):  # one decode per image (its own clipping shape)
            sel = torch.nonzero(img_idx == i).flatten()
            if sel.numel():
                boxes[sel] = self.bbox_head[stage].regress_by_class(rois[sel, 1:], labels[sel], bbox_pred[sel],
                                                                    meta["img_shape"])
        return torch.cat([rois[:, :1], boxes], dim=1)

    def _combine(self, stage_scores: list[Tensor]) -> Tensor:
        """The stages' classifier outputs combined by ``score_combination`` (logits, or probabilities)."""
        if self.score_combination == "logits":
            return torch.stack([s.float() for s in stage_scores]).mean(dim=0)
        return torch.stack([F.softmax(s.float(), dim=-1) for s in stage_scores]).mean(dim=0)

    def _cascade(self, feats: Sequence[Tensor], rois: Tensor, metas: Sequence[dict[str, Any]] | None
                 ) -> tuple[Tensor, Tensor, Tensor]:
        """Run all stages: ``(rois the last stage saw, combined scores, last stage's bbox_pred)``."""
        scores = []
        for stage in range(self.num_stages):
            cls_score, bbox_pred = self._bbox_forward(stage, feats, rois)
            scores.append(cls_score)
            if stage < self.num_stages - 1:
                rois = self._refine_rois(stage, rois, cls_score, bbox_pred, metas)
        return rois, self._combine(scores), bbox_pred

    def forward(self, feats: Sequence[Tensor], rois: Tensor) -> tuple[Tensor, ...]:
        """Tensor mode: ``(scores [R, C + 1], bbox_pred [R, reg_dim], last_rois [R, 5])``: the combined
        classifier output (averaged logits, or averaged probabilities with ``score_combination: probs``), the
        last stage's regression and the RoIs it applies to (refined by the earlier stages, unclipped: no image
        size is known here); with masks also the combined mask probabilities ``[min(R, 100), C, 28, 28]`` of the
        first 100 refined RoIs."""
        last_rois, scores, bbox_pred = self._cascade(feats, rois, None)
        if not self.with_mask:
            return scores, bbox_pred, last_rois
        return scores, bbox_pred, last_rois, self._stage_mask_probs(feats, last_rois[:TENSOR_MODE_MASK_ROIS])

    # ----------------------------------------------------------------- training
    def loss(self, feats: Sequence[Tensor], proposals: Sequence[InstanceData], data_samples: Sequence[Any]
             ) -> dict[str, Tensor]:
        """``s{i}.loss_cls``, ``s{i}.loss_bbox``, ``s{i}.acc`` (and ``s{i}.loss_mask``) of every stage ``i``, the
        losses times ``stage_loss_weights[i]``."""
        if len(proposals) != len(data_samples):
            raise ValueError(f"CascadeRoIHead: {len(proposals)} proposal lists for {len(data_samples)} images")
        gts, ignores = gt_fields(data_samples, feats[0].device, self.num_classes, "CascadeRoIHead")
        metas = [s.metainfo for s in data_samples]
        losses: dict[str, Tensor] = {}
        results = list(proposals)
        for stage in range(self.num_stages):
            head = self.bbox_head[stage]
            sampling = self.assign_and_sample(self.bbox_assigner[stage], self.bbox_sampler[stage], results, gts,
                                              ignores)
            rois = bbox2roi(sampled_priors(sampling))
            cls_score, bbox_pred = self._bbox_forward(stage, feats, rois)
            targets = head.get_targets(sampling, self.train_cfg[stage]["pos_weight"])
            stage_losses = head.loss(cls_score, bbox_pred, rois, *targets)
            if self.with_mask:
                mask_logits = self._mask_forward(stage, feats, bbox2roi([r.pos_priors for r in sampling]))
                mask_t = self.mask_head[stage].get_targets(sampling, gts)
                labels = torch.cat([r.pos_gt_labels for r in sampling]).long()
                stage_losses.update(self.mask_head[stage].loss(mask_logits, mask_t, labels))
            weight = self.stage_loss_weights[stage]
            for key, value in stage_losses.items():
                losses[f"s{stage}.{key}"] = value * weight if "loss" in key else value
            if stage < self.num_stages - 1:
                with torch.no_grad():
                    results = head.refine_bboxes(sampling, rois, cls_score.detach(), bbox_pred.detach(), targets[0],
                                                 metas)
        return losses

    # ----------------------------------------------------------------- inference
    def predict(self, feats: Sequence[Tensor], proposals: Sequence[InstanceData], data_samples: Sequence[Any],
                rescale: bool = True) -> list[InstanceData]:
        """As :meth:`StandardRoIHead.predict`, with the cascade's refinement and score combination."""
        metas = [s.metainfo for s in data_samples]
        rois = bbox2roi([p.bboxes for p in proposals])
        counts = [len(p) for p in proposals]
        if rois.shape[0] == 0:
            results = [empty_instances(rois.device) for _ in metas]
        else:
            last_rois, scores, bbox_pred = self._cascade(feats, rois, metas)
            results = self.bbox_head[-1].predict_by_feat(
                last_rois.split(counts), scores.split(counts), bbox_pred.split(counts), metas, self.test_cfg,
                rescale=rescale and not self.with_mask, scores_are_probs=self.score_combination == "probs",
            )
        if self.with_mask:
            results = self.predict_mask(feats, metas, results, rescale, self.mask_head[-1])
        return results

    def _stage_mask_probs(self, feats: Sequence[Tensor], rois: Tensor) -> Tensor:
        """Mask probabilities ``[R, C, h, w]``: the mean over the stages' mask heads, or the last one's."""
        stages = range(self.num_stages) if self.mask_combination == "mean" else [self.num_stages - 1]
        return torch.stack([self._mask_forward(s, feats, rois).float().sigmoid() for s in stages]).mean(dim=0)

    def _mask_probs(self, feats: Sequence[Tensor], mask_rois: Tensor, labels: Tensor) -> Tensor:
        probs = self._stage_mask_probs(feats, mask_rois)
        return self.mask_head[-1]._select(probs, labels)
