"""Pick the priors a two-stage head trains on: a fixed budget per image with a target share of positives."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from detection.models.task_utils.max_iou_assigner import AssignResult
from detection.registry import TASK_UTILS


@dataclass
class SamplingResult:
    """The sampled priors of one image.

    ``priors`` [N', 4] are the priors the indices point into (the gt boxes first when the sampler added them);
    ``pos_inds`` [P] / ``neg_inds`` [Q] int64; ``pos_assigned_gt_inds`` [P] int64 0-based gt index;
    ``pos_gt_bboxes`` [P, 4], ``pos_gt_labels`` [P] int64; ``num_gts`` gt boxes were added at the front
    when ``gt_added`` (Cascade R-CNN drops them before refining).
    """

    priors: Tensor
    pos_inds: Tensor
    neg_inds: Tensor
    pos_assigned_gt_inds: Tensor
    pos_gt_bboxes: Tensor
    pos_gt_labels: Tensor
    num_gts: int
    gt_added: bool

    @property
    def pos_priors(self) -> Tensor:
        return self.priors[self.pos_inds]

    @property
    def neg_priors(self) -> Tensor:
        return self.priors[self.neg_inds]

    @property
    def pos_is_gt(self) -> Tensor:
        """[P] bool: the positive is one of the added gt boxes."""
        if not self.gt_added:
            return torch.zeros_like(self.pos_inds, dtype=torch.bool)
        return self.pos_inds < self.num_gts


def _result(assign: AssignResult, priors: Tensor, gt_bboxes: Tensor, pos: Tensor, neg: Tensor,
            gt_added: bool) -> SamplingResult:
    gt_idx = assign.gt_inds[pos] - 1
    pos_gt = gt_bboxes.reshape(-1, 4)[gt_idx] if gt_bboxes.numel() else priors.new_zeros((0, 4))
    return SamplingResult(priors, pos, neg, gt_idx, pos_gt, assign.labels[pos], assign.num_gts, gt_added)


def _random_subset(inds: Tensor, num: int) -> Tensor:
    """``num`` of ``inds`` drawn without replacement (all when there are fewer), on their device."""
    if inds.numel() <= num:
        return inds
    return inds[torch.randperm(inds.numel(), device=inds.device)[:num]]


@TASK_UTILS.register_module()
class RandomSampler:
    """``num`` priors per image, up to ``pos_fraction`` of them positive, the rest negatives, drawn at random
    (MMDetection's ``RandomSampler``; torchvision's ``BalancedPositiveNegativeSampler``).

    Args:
        num: priors per image (RPN 256, R-CNN 512).
        pos_fraction: the most positives may take of ``num``.
        neg_pos_ub: > 0 caps negatives at ``neg_pos_ub`` times the positives (-1: no cap).
        add_gt_as_proposals: prepend the gt boxes to the priors as positives (R-CNN heads: the first
            iterations then have positives before the RPN has learnt anything).
    """

    def __init__(self, num: int, pos_fraction: float, neg_pos_ub: float = -1, add_gt_as_proposals: bool = True
                 ) -> None:
        if int(num) < 1:
            raise ValueError(f"RandomSampler: num must be >= 1, got {num!r}")
        if not 0 < pos_fraction <= 1:
            raise ValueError(f"RandomSampler: pos_fraction must be in (0, 1], got {pos_fraction!r}")
        self.num = int(num)
        self.pos_fraction = float(pos_fraction)
        self.neg_pos_ub = neg_pos_ub
        self.add_gt_as_proposals = add_gt_as_proposals

    def sample(self, assign_result: AssignResult, priors: Tensor, gt_bboxes: Tensor, gt_labels: Tensor
               ) -> SamplingResult:
        """Sample one image's priors.

        Args:
            assign_result: the assigner's result over ``priors``.
            priors: ``[N, 4]`` boxes the assignment was made for.
            gt_bboxes: ``[M, 4]``; gt_labels: ``[M]`` int64.

        Returns:
            a :class:`SamplingResult`; with ``add_gt_as_proposals`` its ``priors`` are ``[M + N, 4]``.
        """
        priors = priors[:, :4]
        assign = assign_result
        added = self.add_gt_as_proposals and gt_bboxes.numel() > 0
        if added:
            m = gt_bboxes.shape[0]
            device = priors.device
            priors = torch.cat([gt_bboxes.to(priors.dtype), priors], dim=0)
            assign = AssignResult(
                assign.num_gts,
                torch.cat([torch.arange(1, m + 1, dtype=torch.long, device=device), assign.gt_inds]),
                torch.cat([assign.max_overlaps.new_ones(m), assign.max_overlaps]),
                torch.cat([gt_labels.long().to(device), assign.labels]),
            )
        pos = _random_subset(torch.nonzero(assign.gt_inds > 0).flatten(), int(self.num * self.pos_fraction))
        num_neg = self.num - pos.numel()
        if self.neg_pos_ub >= 0:
            num_neg = min(num_neg, int(self.neg_pos_ub * max(1, pos.numel())))
        neg = _random_subset(torch.nonzero(assign.gt_inds == 0).flatten(), num_neg)
        return _result(assign, priors, gt_bboxes, pos, neg, added)


@TASK_UTILS.register_module()
class PseudoSampler:
    """Every positive and every negative prior, no gt added (heads with their own loss weighting)."""

    def sample(self, assign_result: AssignResult, priors: Tensor, gt_bboxes: Tensor, gt_labels: Tensor
               ) -> SamplingResult:
        """See :meth:`RandomSampler.sample`; ``priors`` are returned unchanged."""
        pos = torch.nonzero(assign_result.gt_inds > 0).flatten()
        neg = torch.nonzero(assign_result.gt_inds == 0).flatten()
        return _result(assign_result, priors[:, :4], gt_bboxes, pos, neg, False)
