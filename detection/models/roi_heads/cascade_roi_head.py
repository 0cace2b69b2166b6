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
from .rcnn_config import check_test_cfg, check_train_cfg
from .standard_roi_head import TENSOR_MODE_MASK_ROIS, RoIHeadBase
from .utils import bbox2roi, gt_fields

SCORE_COMBINATIONS = ("logits", "probs")
MASK_COMBINATIONS = ("mean", "last")


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
        num_stages: number of box heads (MMDetection: 3).
        stage_loss_weights: weight of each stage's losses (MMDetection: ``[1, 0.5, 0.25]``).
        bbox_roi_extractor: one MODELS config for every stage, or a list (RoIAlign 7x7).
        bbox_head: list of ``num_stages`` MODELS configs (MMDetection: class-agnostic ``Shared2FCBBoxHead`` with
            coder stds 0.1/0.2, 0.05/0.1, 0.033/0.067, smooth L1).
        score_combination: how inference combines the stages' classifiers: ``'logits'`` averages the stages'
            logits then applies softmax (MMDetection), ``'probs'`` averages their softmax probabilities
            (Detectron2).
        test_cfg: as :class:`StandardRoIHead`.
        train_cfg: list of ``num_stages`` stage configs (keys of :class:`StandardRoIHead`'s ``train_cfg``;
            MMDetection: IoU 0.5 / 0.6 / 0.7, 512 RoIs, 25 % positives); None: inference only.
        mask_roi_extractor: one config or a list (RoIAlign 14x14 for Cascade Mask R-CNN); None with a mask head:
            the box extractors are used.
        mask_head: one config (repeated: a mask head per stage, as MMDetection) or a list; None: boxes only.
        mask_combination: with a mask head (required then; None: not used): ``'mean'`` averages the mask
            probabilities of every stage's mask head on the final boxes (MMDetection); ``'last'`` uses the last
            stage's mask head only.

    The values of the shipped configs are in ``configs/_base_/models/cascade_rcnn_r50_fpn.yaml``.
    """

    def __init__(
        self,
        num_classes: int,
        in_channels: int | Sequence[int],
        num_stages: int,
        stage_loss_weights: Sequence[float],
        bbox_roi_extractor: dict[str, Any] | list[dict[str, Any]],
        bbox_head: list[dict[str, Any]],
        score_combination: str,
        test_cfg: dict[str, Any],
        train_cfg: list[dict[str, Any]] | None = None,
        strides: Sequence[int] | None = None,
        mask_roi_extractor: dict[str, Any] | list[dict[str, Any]] | None = None,
        mask_head: dict[str, Any] | list[dict[str, Any]] | None = None,
        mask_combination: str | None = None,
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
        with_mask = mask_head is not None
        if with_mask and mask_combination not in MASK_COMBINATIONS:
            raise ValueError(f"CascadeRoIHead: mask_combination={mask_combination!r} is invalid with a mask head; "
                             f"accepted: {list(MASK_COMBINATIONS)}")
        if isinstance(train_cfg, dict):
            raise ValueError("CascadeRoIHead: train_cfg must be a list with one dict per stage (mmdet's "
                             "train_cfg.rcnn of Cascade R-CNN), got one dict")
        self.num_stages = num_stages
        self.stage_loss_weights = [float(w) for w in stage_loss_weights]
        self.score_combination = score_combination
        self.mask_combination = mask_combination
        train_cfgs = [None] * num_stages if train_cfg is None else _per_stage("train_cfg", train_cfg, num_stages)
        checked = [check_train_cfg(f"CascadeRoIHead stage {i}", c, with_mask) for i, c in enumerate(train_cfgs)]
        self.train_cfg = None if train_cfg is None else checked
        self.test_cfg = check_test_cfg("CascadeRoIHead", test_cfg, with_mask)

        if not isinstance(bbox_head, (list, tuple)):
            raise ValueError(f"CascadeRoIHead: bbox_head must be a list with one config per stage, got {bbox_head!r}")
        head_cfgs = _per_stage("bbox_head", bbox_head, num_stages)
        extractor_cfgs = _per_stage("bbox_roi_extractor", bbox_roi_extractor, num_stages)
        self.bbox_roi_extractor = nn.ModuleList(
            self._build_extractor(c, f"bbox_roi_extractor[{i}]") for i, c in enumerate(extractor_cfgs)
        )
        self.bbox_head = nn.ModuleList()
        for i, (cfg, ext) in enumerate(zip(head_cfgs, self.bbox_roi_extractor)):
            channels, size = self._head_input(ext, None)
            self.bbox_head.append(self._build_head(cfg, f"bbox_head[{i}]", channels, size))

        self.share_roi_extractor = with_mask and mask_roi_extractor is None
        self.mask_roi_extractor: nn.ModuleList | None = None
        self.mask_head: nn.ModuleList | None = None
        if with_mask:
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
                if self.train_cfg is not None and head.mask_size != self.train_cfg[i]["mask_size"]:
                    raise ValueError(f"CascadeRoIHead: train_cfg[{i}].mask_size={self.train_cfg[i]['mask_size']} but "
                                     f"mask_head[{i}] predicts {head.mask_size}x{head.mask_size} masks")
                self.mask_head.append(head)
        self.bbox_assigner = [TASK_UTILS.build(c["assigner"]) for c in self.train_cfg or []]
        self.bbox_sampler = [TASK_UTILS.build(c["sampler"]) for c in self.train_cfg or []]

    @property
    def with_mask(self) -> bool:
        return self.mask_head is not None

    # ----------------------------------------------------------------- forwards
    def _bbox_forward(self, stage: int, feats: Sequence[Tensor], rois: Tensor) -> tuple[Tensor, Tensor]:
        return self.bbox_head[stage](self.bbox_roi_extractor[stage](feats, rois))

    def _mask_forward(self, stage: int, feats: Sequence[Tensor], rois: Tensor) -> Tensor:
        extractors = self.bbox_roi_extractor if self.share_roi_extractor else self.mask_roi_extractor
        return self.mask_head[stage](extractors[stage](feats, rois))

    def _refine_rois(self, stage: int, rois: Tensor, cls_score: Tensor, bbox_pred: Tensor) -> Tensor:
        """Tensor mode: every RoI ``[R, 5]`` moved by ``stage``'s regression of its best foreground class
        (not clipped: no image size is known here). Detached, as between training stages (RoI pooling passes no
        gradient to its boxes anyway): the pruner's graph tracer cannot size this concatenation of boxes."""
        labels = cls_score[:, :-1].argmax(dim=1)
        boxes = self.bbox_head[stage].regress_by_class(rois[:, 1:], labels, bbox_pred, None)
        return torch.cat([rois[:, :1], boxes], dim=1).detach()

    def _combine(self, stage_scores: list[Tensor]) -> Tensor:
        """The stages' classifier outputs combined by ``score_combination`` (logits, or probabilities)."""
        if self.score_combination == "logits":
            return torch.stack([s.float() for s in stage_scores]).mean(dim=0)
        return torch.stack([F.softmax(s.float(), dim=-1) for s in stage_scores]).mean(dim=0)

    def _cascade(self, feats: Sequence[Tensor], rois: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Tensor mode, all stages: ``(rois the last stage saw, combined scores, last stage's bbox_pred)``."""
        scores = []
        for stage in range(self.num_stages):
            cls_score, bbox_pred = self._bbox_forward(stage, feats, rois)
            scores.append(cls_score)
            if stage < self.num_stages - 1:
                rois = self._refine_rois(stage, rois, cls_score, bbox_pred)
        return rois, self._combine(scores), bbox_pred

    def forward(self, feats: Sequence[Tensor], rois: Tensor) -> tuple[Tensor, ...]:
        """Tensor mode: ``(scores [R, C + 1], bbox_pred [R, reg_dim], last_rois [R, 5])``: the combined
        classifier output (averaged logits, or averaged probabilities with ``score_combination: probs``), the
        last stage's regression and the RoIs it applies to (refined by the earlier stages, unclipped: no image
        size is known here); with masks also the combined mask probabilities ``[min(R, 100), C, 28, 28]`` of the
        first 100 refined RoIs."""
        last_rois, scores, bbox_pred = self._cascade(feats, rois)
        if not self.with_mask:
            return scores, bbox_pred, last_rois
        return scores, bbox_pred, last_rois, self._stage_mask_probs(feats, last_rois[:TENSOR_MODE_MASK_ROIS])

    # ----------------------------------------------------------------- training
    def loss(self, feats: Sequence[Tensor], proposals: Sequence[InstanceData], data_samples: Sequence[Any]
             ) -> dict[str, Tensor]:
        """``s{i}.loss_cls``, ``s{i}.loss_bbox``, ``s{i}.acc`` (and ``s{i}.loss_mask``) of every stage ``i``, the
        losses times ``stage_loss_weights[i]``."""
        self._check_trainable()
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
                    results = head.refine_bboxes(sampling, rois, cls_score.detach(), bbox_pred.detach(),
                                                 self.refine_labels(targets[0]), metas)
        return losses

    def refine_labels(self, target_labels: Tensor) -> Tensor:
        """The labels handed to ``refine_bboxes`` in training, where ``num_classes`` stands for the RoI's
        top-scoring foreground class. MMDetection's rule, here: the targets (positives move by their target
        class's regression, negatives by their top-scoring class's)."""
        return target_labels

    # ----------------------------------------------------------------- inference (two_stage_infer)
    def box_stages(self) -> list[tuple[nn.Module, nn.Module | None, nn.Module]]:
        return [(e, None, h) for e, h in zip(self.bbox_roi_extractor, self.bbox_head)]

    def mask_stages(self) -> list[tuple[nn.Module, nn.Module | None, nn.Module]]:
        extractors = self.bbox_roi_extractor if self.share_roi_extractor else self.mask_roi_extractor
        stages = [(e, None, h) for e, h in zip(extractors, self.mask_head)]
        return stages if self.mask_combination == "mean" else stages[-1:]

    def combine_scores(self, stage_scores: list[Tensor]) -> Tensor:
        combined = self._combine(stage_scores)
        return combined if self.score_combination == "probs" else F.softmax(combined, dim=-1)

    def _stage_mask_probs(self, feats: Sequence[Tensor], rois: Tensor) -> Tensor:
        """Mask probabilities ``[R, C, h, w]``: the mean over the stages' mask heads, or the last one's."""
        stages = range(self.num_stages) if self.mask_combination == "mean" else [self.num_stages - 1]
        return torch.stack([self._mask_forward(s, feats, rois).float().sigmoid() for s in stages]).mean(dim=0)
