"""YOLOv3 target assignment, vectorised over every box of the batch at once.

A ground-truth box is matched to the one anchor (of all levels) whose width/height fits it best
(IoU of the two boxes centred on the same point). It becomes a positive only on the level whose
``anchor_masks`` holds that anchor, in the cell that contains its centre; elsewhere it is a negative,
except where a prediction already overlaps a box by more than ``ignore_thresh`` ("ignore region").

Priors are numbered per image as the head flattens its outputs: levels in order (deepest first),
then anchor of the level, then row, then column.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor
from torchvision.ops import box_iou


class YOLOTargets(NamedTuple):
    """One row per positive prior (P rows)."""

    batch_idx: Tensor  # [P] image index
    prior_idx: Tensor  # [P] prior index inside its image (levels, anchors, rows, columns)
    gt_idx: Tensor  # [P] index into the batch's concatenated gt boxes
    level: Tensor  # [P] feature level (0 = deepest)
    anchor_idx: Tensor  # [P] index into the head's full anchor list
    grid_xy: Tensor  # [P, 2] cell column, row
    labels: Tensor  # [P] class index
    txy: Tensor  # [P, 2] the gt centre's offset inside its cell, in [0, 1)
    twh: Tensor  # [P, 2] log(gt wh / anchor wh)
    scale: Tensor  # [P] 2 - gt_w * gt_h / (input_w * input_h): small boxes weigh more
    gt_bboxes: Tensor  # [P, 4] xyxy, input pixels


def wh_iou(gt_wh: Tensor, anchor_wh: Tensor) -> Tensor:
    """IoU of boxes sharing one centre: [M, 2] x [K, 2] -> [M, K]."""
    inter = torch.min(gt_wh[:, None], anchor_wh[None]).prod(-1)
    union = gt_wh.prod(-1)[:, None] + anchor_wh.prod(-1)[None] - inter
    return inter / union.clamp(min=1e-9)


def batched_box_iou(boxes1: Tensor, boxes2: Tensor) -> Tensor:
    """Pairwise IoU per image: [B, N, 4] x [B, M, 4] (xyxy) -> [B, N, M].

    ``torchvision.ops.box_iou`` vectorised over the batch with ``torch.vmap``: images stay apart
    (box_iou on the flattened batch would pair every box with every box of every image).
    """
    return torch.vmap(box_iou)(boxes1, boxes2)


def ignore_mask(pred_boxes: Tensor, gt_boxes: Tensor, gt_valid: Tensor, ignore_thresh: float) -> Tensor:
    """Priors whose predicted box overlaps any real box of their image by IoU > ``ignore_thresh``.

    Args:
        pred_boxes: [B, N, 4] decoded predictions (xyxy).
        gt_boxes: [B, M, 4] each image's boxes, padded to the batch's largest count M.
        gt_valid: [B, M] bool, False at padded slots.
    Returns:
        [B, N] bool (True: no objectness loss for this prior when it is a negative).
    """
    if gt_boxes.shape[1] == 0:
        return torch.zeros(pred_boxes.shape[:2], dtype=torch.bool, device=pred_boxes.device)
    iou = batched_box_iou(pred_boxes, gt_boxes)
    iou = iou.masked_fill(~gt_valid[:, None, :], 0.0)
    return iou.amax(dim=2) > ignore_thresh


class YOLOAssigner:
    """Assigns the batch's gt boxes to priors (see the module docstring).

    Args:
        anchors: [K, 2] anchor (w, h) in input pixels.
        anchor_masks: per level (deepest first) the indices into ``anchors`` it uses.
        strides: per level, its stride in input pixels.
    """

    def __init__(self, anchors: Tensor, anchor_masks: Sequence[Sequence[int]], strides: Sequence[int]) -> None:
        if len(anchor_masks) != len(strides):
            raise ValueError(
                f"YOLOAssigner: {len(anchor_masks)} anchor_masks but {len(strides)} strides; give one of each per level"
            )
        self.anchors = anchors.float()
        self.anchor_masks = [list(m) for m in anchor_masks]
        self.strides = [int(s) for s in strides]

    def level_offsets(self, featmap_sizes: Sequence[tuple[int, int]]) -> list[int]:
        """Index of each level's first prior inside an image, plus the total at the end."""
        offsets = [0]
        for mask, (h, w) in zip(self.anchor_masks, featmap_sizes):
            offsets.append(offsets[-1] + len(mask) * h * w)
        return offsets

    def assign(
        self,
        gt_bboxes: Tensor,
        gt_labels: Tensor,
        gt_batch_idx: Tensor,
        featmap_sizes: Sequence[tuple[int, int]],
        input_shape: tuple[int, int],
        num_images: int,
    ) -> YOLOTargets:
        """Positives of the whole batch.

        Args:
            gt_bboxes: [M, 4] xyxy in input pixels, every image's boxes concatenated.
            gt_labels: [M] class indices.
            gt_batch_idx: [M] the image of each box.
            featmap_sizes: per level (H, W).
            input_shape: (H, W) of the (padded) network input; normalises the (2 - wh) scale.
            num_images: the batch size.
        """
        device = gt_bboxes.device
        gt_bboxes = gt_bboxes.float()
        anchors = self.anchors.to(device)
        cxy = (gt_bboxes[:, :2] + gt_bboxes[:, 2:]) / 2
        wh = gt_bboxes[:, 2:] - gt_bboxes[:, :2]
        valid = (wh > 0).all(dim=1)  # degenerate boxes (e.g. cropped away) have no log-size target
        best = wh_iou(wh, anchors).argmax(dim=1)
        offsets = self.level_offsets(featmap_sizes)

        rows: list[tuple[Tensor, ...]] = []
        for level, (mask, stride, (h, w)) in enumerate(zip(self.anchor_masks, self.strides, featmap_sizes)):
            local = torch.full((len(anchors),), -1, dtype=torch.long, device=device)
            local[torch.as_tensor(mask, dtype=torch.long, device=device)] = torch.arange(len(mask), device=device)
            a = local[best]
            gt_idx = torch.nonzero(valid & (a >= 0), as_tuple=True)[0]
            a = a[gt_idx]
            pos = cxy[gt_idx] / stride
            gx = pos[:, 0].floor().long().clamp(0, w - 1)
            gy = pos[:, 1].floor().long().clamp(0, h - 1)
            prior = offsets[level] + (a * h + gy) * w + gx
            rows.append((gt_idx, prior, torch.full_like(gt_idx, level), gx, gy, pos))
        gt_idx, prior, level, gx, gy, pos = (torch.cat(parts) for parts in zip(*rows))
        batch = gt_batch_idx[gt_idx].long()

        # Two boxes on one prior: the later one wins (as a loop over boxes would leave it), deterministically.
        slot = batch * offsets[-1] + prior
        order = torch.arange(len(slot), device=device)
        winner = torch.full((num_images * offsets[-1],), -1, dtype=torch.long, device=device)
        winner.scatter_reduce_(0, slot, order, reduce="amax", include_self=True)
        keep = winner[slot] == order
        gt_idx, prior, level, gx, gy, pos, batch = (t[keep] for t in (gt_idx, prior, level, gx, gy, pos, batch))

        anchor_idx = best[gt_idx]
        grid_xy = torch.stack([gx, gy], dim=1)
        img_area = float(input_shape[0]) * float(input_shape[1])
        return YOLOTargets(
            batch_idx=batch,
            prior_idx=prior,
            gt_idx=gt_idx,
            level=level,
            anchor_idx=anchor_idx,
            grid_xy=grid_xy,
            labels=gt_labels[gt_idx].long(),
            txy=(pos - grid_xy.to(pos.dtype)).clamp(0, 1),  # a centre on the far edge stays in the last cell
            twh=torch.log(wh[gt_idx] / anchors[anchor_idx]),
            scale=2.0 - wh[gt_idx].prod(dim=1) / img_area,
            gt_bboxes=gt_bboxes[gt_idx],
        )
