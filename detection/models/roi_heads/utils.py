"""Small helpers of the RoI heads: boxes <-> RoIs, per-image splits, gt fields of data samples, cfg checks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from mmengine.structures import InstanceData
from torch import Tensor

from oars.errors import DataError


def bbox2roi(bbox_list: Sequence[Tensor]) -> Tensor:
    """Stack per-image boxes into one RoI tensor with the image index in front.

    Args:
        bbox_list: per image a ``[N_i, 4]`` (or wider: only the first 4 columns are used) xyxy float tensor.

    Returns:
        float32 ``[sum N_i, 5]``: ``(batch_idx, x1, y1, x2, y2)`` rows, images in order (the layout
        ``torchvision.ops.roi_align`` takes), so a per-image split is ``split([N_0, N_1, ...])``.
    """
    if not bbox_list:
        raise ValueError("bbox2roi: got no images (an empty list of box tensors)")
    rois = []
    for i, boxes in enumerate(bbox_list):
        boxes = boxes[:, :4].float()
        rois.append(torch.cat([boxes.new_full((boxes.shape[0], 1), float(i)), boxes], dim=1))
    return torch.cat(rois, dim=0)


def gt_fields(data_samples: Sequence[Any], device: torch.device, num_classes: int, owner: str = "RoI head"
              ) -> tuple[list[InstanceData], list[Tensor | None]]:
    """Per image the ``gt_instances`` (on ``device``) and the ignored boxes ``[K, 4]`` (None without any).

    Raises:
        ValueError: a data sample has no ``gt_instances`` (``loss`` needs annotations).
        DataError: a gt label outside ``[0, num_classes)`` (names the images).
    """
    gts, ignores = [], []
    for i, sample in enumerate(data_samples):
        if "gt_instances" not in sample:
            raise ValueError(f"{owner}: data_samples[{i}] has no gt_instances; mode='loss' needs annotations")
        gts.append(sample.gt_instances.to(device))
        ignored = sample.get("ignored_instances", None)
        boxes = None if ignored is None or "bboxes" not in ignored else ignored.bboxes.to(device)
        ignores.append(boxes if boxes is not None and boxes.numel() else None)
    labels = torch.cat([g.labels.reshape(-1).long() for g in gts])
    if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= num_classes):
        where = [s.metainfo.get("img_path", f"sample {i}") for i, (s, g) in enumerate(zip(data_samples, gts))
                 if g.labels.numel() and (int(g.labels.min()) < 0 or int(g.labels.max()) >= num_classes)]
        raise DataError(f"{owner}: gt labels must be in [0, {num_classes - 1}] (num_classes={num_classes}); out of "
                        f"range in {where}")
    return gts, ignores


def check_keys(owner: str, cfg: Mapping[str, Any] | None, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """``defaults`` updated by ``cfg`` (top-level keys); an unknown key is a ValueError naming the accepted ones."""
    cfg = dict(cfg or {})
    unknown = sorted(set(cfg) - set(defaults))
    if unknown:
        raise ValueError(f"{owner}: unknown keys {unknown}; accepted: {sorted(defaults)}")
    return {**defaults, **cfg}


def scale_factor_of(meta: Mapping[str, Any]) -> tuple[float, float]:
    """``(w_scale, h_scale)`` of an image's metainfo (pipeline pixels / original pixels; 1 when absent)."""
    sf = meta.get("scale_factor", (1.0, 1.0))
    if isinstance(sf, (int, float)):
        return float(sf), float(sf)
    return float(sf[0]), float(sf[1])
