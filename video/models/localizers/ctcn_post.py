"""C-TCN's detections from anchor scores (PaddleVideo ``BoxCoder.decode``): per class, a score threshold, hard
NMS, then Gaussian Soft-NMS with a final score threshold; vectorised over the classes."""

from __future__ import annotations

import torch
from torch import Tensor
from torchvision.ops import batched_nms


def segment_nms(segments: Tensor, scores: Tensor, classes: Tensor, iou_threshold: float) -> Tensor:
    """Hard NMS of 1-D segments, independently per class (torchvision's ``batched_nms`` on boxes of unit height:
    their IoU is the segments' temporal IoU).

    Args:
        segments: float [K, 2] (start, end).
        scores: float [K].
        classes: int64 [K].
        iou_threshold: a segment overlapping a kept one of its class by more than this is dropped.

    Returns:
        Tensor: int64 indices of the kept segments, by decreasing score.
    """
    zeros = torch.zeros_like(segments[:, 0])
    boxes = torch.stack([segments[:, 0], zeros, segments[:, 1], zeros + 1.0], dim=1)
    return batched_nms(boxes.float(), scores.float(), classes, iou_threshold)


def gaussian_soft_nms_rows(segments: Tensor, scores: Tensor, sigma: float, min_score: float) -> Tensor:
    """Gaussian Soft-NMS (Bodla et al. 2017; PaddleVideo's ``soft_nms(method=2)``) of many independent sets at
    once, one step per kept segment, each step over every set.

    Each step keeps the highest-scoring live segment ``m`` of each row and multiplies every other live score by
    ``exp(-iou(i, m)^2 / sigma)``; a score below ``min_score`` dies (PaddleVideo removes it at once: it could only
    be picked after every live one, and then only decays scores already below the threshold, so the kept set is
    the same).

    Args:
        segments: float [R, K, 2] (start, end), rows padded.
        scores: float [R, K], 0 (or anything below ``min_score``) on padding.
        sigma: the Gaussian's width (PaddleVideo: 0.9).
        min_score: the final threshold (PaddleVideo: 0.004).

    Returns:
        Tensor: float [R, K], each segment's score when it was kept, 0 where it was not.
    """
    score = scores.clone()
    alive = score >= min_score
    kept = torch.zeros_like(score)
    rows = torch.arange(score.shape[0], device=score.device)
    start, end = segments[..., 0], segments[..., 1]
    for _ in range(score.shape[1]):
        live_rows = alive.any(dim=1)
        if not bool(live_rows.any()):
            break
        m = torch.where(alive, score, torch.full_like(score, -1.0)).argmax(dim=1)  # [R]
        m_score = score[rows, m]
        kept[rows[live_rows], m[live_rows]] = m_score[live_rows]
        alive[rows, m] = False
        s_m, e_m = start[rows, m][:, None], end[rows, m][:, None]
        inter = (end.minimum(e_m) - start.maximum(s_m)).clamp(min=0)
        union = (end - start) + (e_m - s_m) - inter
        iou = inter / union.clamp(min=1e-12)
        score = torch.where(alive & live_rows[:, None], score * torch.exp(-iou.square() / sigma), score)
        alive &= score >= min_score
    return kept


def ctcn_detections(segments: Tensor, probs: Tensor, score_thresh: float = 0.001, nms_thresh: float = 0.8,
                    soft_sigma: float = 0.9, soft_thresh: float = 0.004, pre_nms_top_k: int = 200,
                    max_per_video: int = 1000) -> Tensor:
    """One video's detections (PaddleVideo's decode with its defaults), plus two caps PaddleVideo does not have.

    Per foreground class: of its ``pre_nms_top_k`` best anchors, those scoring above ``score_thresh``; hard NMS at
    ``nms_thresh``; Gaussian Soft-NMS (``soft_sigma``) dropping scores below ``soft_thresh``. Then all classes
    together, by decreasing score, at most ``max_per_video``. Why the first cap: an untrained or unsure model puts
    every class above 0.001 on every anchor (200 x 1785 candidates), whose per-class NMS alone takes seconds per
    video; a trained model's low-score tail is cut by ``max_per_video`` anyway.

    Args:
        segments: float [A, 2] decoded (start, end), normalised time.
        probs: float [A, K + 1] softmax scores, background first.
        score_thresh, nms_thresh, soft_sigma, soft_thresh: PaddleVideo's ``score_thresh``, ``nms_thresh``,
            ``sigma_thresh``, ``soft_thresh`` (0.001, 0.8, 0.9, 0.004).
        pre_nms_top_k: anchors per class that may become candidates.
        max_per_video: detections returned.

    Returns:
        Tensor: float [D, 4] (start, end, score, class id in ``[0, K)``), by decreasing score.
    """
    fg = probs[:, 1:]
    top_score, top_anchor = fg.topk(min(pre_nms_top_k, fg.shape[0]), dim=0)  # [k, K], by decreasing score
    rank_idx, cls_idx = torch.nonzero(top_score > score_thresh, as_tuple=True)
    if cls_idx.numel() == 0:
        return segments.new_zeros((0, 4))
    anchor_idx = top_anchor[rank_idx, cls_idx]
    cand_seg, cand_score = segments[anchor_idx], top_score[rank_idx, cls_idx]
    keep = segment_nms(cand_seg, cand_score, cls_idx, nms_thresh)  # by decreasing score
    cand_seg, cand_score, cls_idx = cand_seg[keep], cand_score[keep], cls_idx[keep]
    # rank of each survivor within its class (a stable sort by class keeps the score order inside a class)
    order = torch.sort(cls_idx, stable=True).indices
    cand_seg, cand_score, cls_idx = cand_seg[order], cand_score[order], cls_idx[order]
    classes, counts = torch.unique_consecutive(cls_idx, return_counts=True)
    first = torch.cumsum(counts, 0) - counts
    row = torch.repeat_interleave(torch.arange(classes.numel(), device=cls_idx.device), counts)
    rank = torch.arange(cls_idx.numel(), device=cls_idx.device) - first[row]
    width = int(counts.max())
    seg_grid = segments.new_zeros((classes.numel(), width, 2))
    score_grid = segments.new_zeros((classes.numel(), width))
    seg_grid[row, rank] = cand_seg
    score_grid[row, rank] = cand_score
    kept = gaussian_soft_nms_rows(seg_grid, score_grid, soft_sigma, soft_thresh)
    r, k = torch.nonzero(kept > 0, as_tuple=True)
    out = torch.cat([seg_grid[r, k], kept[r, k, None], classes[r, None].to(segments.dtype)], dim=1)
    return out[out[:, 2].argsort(descending=True)[:max_per_video]]
