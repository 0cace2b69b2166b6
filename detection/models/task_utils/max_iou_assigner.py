"""Label priors (anchors or proposals) positive, negative or ignored by their IoU with the ground truth."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor
from torchvision.ops import box_area, box_iou

from detection.registry import TASK_UTILS


class AssignResult(NamedTuple):
    """What an assigner decided for ``N`` priors against ``num_gts`` boxes.

    ``gt_inds``: int64 [N], ``-1`` ignored (neither positive nor negative), ``0`` negative, ``k > 0`` positive
    for gt ``k - 1`` (MMDetection's convention). ``max_overlaps``: float32 [N], the prior's best IoU.
    ``labels``: int64 [N], the gt class of positives, ``-1`` elsewhere.
    """

    num_gts: int
    gt_inds: Tensor
    max_overlaps: Tensor
    labels: Tensor


def box_iof(boxes: Tensor, regions: Tensor) -> Tensor:
    """Intersection over the area of each ``boxes`` row: ``[N, 4] x [K, 4] -> [N, K]`` float (how much of a prior
    lies inside an ignore region)."""
    lt = torch.max(boxes[:, None, :2], regions[None, :, :2])
    rb = torch.min(boxes[:, None, 2:], regions[None, :, 2:])
    inter = (rb - lt).clamp(min=0).prod(dim=-1)
    return inter / box_area(boxes).clamp(min=1e-6)[:, None]


@TASK_UTILS.register_module()
class MaxIoUAssigner:
    """Assign each prior to the gt box it overlaps most (MMDetection's ``MaxIoUAssigner``).

    A prior is positive when its best IoU is ``>= pos_iou_thr``, negative when it is in ``[0, neg_iou_thr)``
    (or in ``[neg_iou_thr[0], neg_iou_thr[1])`` when a pair is given), ignored otherwise. With
    ``match_low_quality`` each gt also takes the prior(s) it overlaps most (all ties with ``gt_max_assign_all``)
    when that IoU is ``>= min_pos_iou`` and above 0, so that no gt is left without a positive (the RPN's rule);
    a later gt wins a prior two gts share, as in MMDetection. Priors covered by an ignore box by more than
    ``ignore_iof_thr`` of their area are ignored (crowd regions).

    Args:
        pos_iou_thr: IoU from which a prior is positive.
        neg_iou_thr: IoU below which a prior is negative, or a ``(low, high)`` range.
        min_pos_iou: the least IoU of a low-quality match.
        gt_max_assign_all: low-quality matching takes every prior tied at a gt's best IoU, not just one.
        ignore_iof_thr: > 0 enables ignore boxes (intersection over the prior's area).
        match_low_quality: enable low-quality matches (RPN: yes; R-CNN stages: no).
    """

    def __init__(
        self,
        pos_iou_thr: float,
        neg_iou_thr: float | Sequence[float],
        min_pos_iou: float = 0.0,
        gt_max_assign_all: bool = True,
        ignore_iof_thr: float = -1.0,
        match_low_quality: bool = True,
    ) -> None:
        if isinstance(neg_iou_thr, (int, float)):
            neg_range = (0.0, float(neg_iou_thr))
        elif len(neg_iou_thr) == 2:
            neg_range = (float(neg_iou_thr[0]), float(neg_iou_thr[1]))
        else:
            raise ValueError(f"MaxIoUAssigner: neg_iou_thr must be a number or (low, high), got {neg_iou_thr!r}")
        if neg_range[1] > pos_iou_thr:
            raise ValueError(
                f"MaxIoUAssigner: neg_iou_thr {neg_iou_thr!r} exceeds pos_iou_thr {pos_iou_thr}; a prior cannot be "
                "both negative and positive"
            )
        self.pos_iou_thr = float(pos_iou_thr)
        self.neg_range = neg_range
        self.min_pos_iou = float(min_pos_iou)
        self.gt_max_assign_all = gt_max_assign_all
        self.ignore_iof_thr = float(ignore_iof_thr)
        self.match_low_quality = match_low_quality

    def assign(
        self, priors: Tensor, gt_bboxes: Tensor, gt_labels: Tensor, gt_bboxes_ignore: Tensor | None = None
    ) -> AssignResult:
        """Assign ``N`` priors to ``M`` gt boxes.

        Args:
            priors: ``[N, 4]`` xyxy boxes.
            gt_bboxes: ``[M, 4]`` xyxy boxes (M may be 0: every prior is then negative).
            gt_labels: ``[M]`` int64 class indices.
            gt_bboxes_ignore: ``[K, 4]`` ignore regions, or None.

        Returns:
            an :class:`AssignResult` over the ``N`` priors.
        """
        priors, gts = priors.float(), gt_bboxes.float()
        n, m = priors.shape[0], gts.shape[0]
        device = priors.device
        if m == 0 or n == 0:
            gt_inds = torch.zeros(n, dtype=torch.long, device=device)
            return AssignResult(m, gt_inds, priors.new_zeros(n), torch.full_like(gt_inds, -1))
        overlaps = box_iou(gts, priors)  # [M, N]
        if self.ignore_iof_thr > 0 and gt_bboxes_ignore is not None and gt_bboxes_ignore.numel():
            ignored = box_iof(priors, gt_bboxes_ignore.float()).max(dim=1).values > self.ignore_iof_thr
            overlaps[:, ignored] = -1.0
        max_overlaps, argmax = overlaps.max(dim=0)
        gt_inds = torch.full((n,), -1, dtype=torch.long, device=device)
        lo, hi = self.neg_range
        gt_inds[(max_overlaps >= lo) & (max_overlaps < hi)] = 0
        pos = max_overlaps >= self.pos_iou_thr
        gt_inds[pos] = argmax[pos] + 1
        if self.match_low_quality:
            gt_max = overlaps.max(dim=1).values  # [M]
            eligible = (gt_max >= self.min_pos_iou) & (gt_max > 0)
            if self.gt_max_assign_all:
                best = (overlaps == gt_max[:, None]) & eligible[:, None]  # [M, N]
            else:
                best = torch.zeros_like(overlaps, dtype=torch.bool)
                best[torch.arange(m, device=device), overlaps.argmax(dim=1)] = True
                best &= eligible[:, None]
            ranks = torch.arange(1, m + 1, device=device)[:, None]
            winner = torch.where(best, ranks, torch.zeros_like(ranks)).max(dim=0).values  # last gt wins
            gt_inds = torch.where(winner > 0, winner, gt_inds)
        labels = torch.full_like(gt_inds, -1)
        positive = gt_inds > 0
        labels[positive] = gt_labels.long()[gt_inds[positive] - 1]
        return AssignResult(m, gt_inds, max_overlaps, labels)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(pos_iou_thr={self.pos_iou_thr}, neg_iou_thr={self.neg_range}, "
                f"min_pos_iou={self.min_pos_iou}, match_low_quality={self.match_low_quality})")
