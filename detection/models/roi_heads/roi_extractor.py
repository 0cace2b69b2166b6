"""Pool a fixed-size feature per RoI from the one pyramid level that fits the RoI's size.

``SingleRoIExtractor`` is MMDetection's extractor of the same name; with ``level_mapping: torchvision`` (and
``roi_layer: {sampling_ratio: 2, aligned: false}``) it computes exactly what torchvision's
``MultiScaleRoIAlign`` computes, for a torchvision-compatible preset. The pooling itself is
``torchvision.ops.roi_align`` (or ``roi_pool``), once per level on that level's RoIs, scattered back into RoI
order: a loop over the (4) levels, never over RoIs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn
from torchvision.ops import roi_align, roi_pool

from detection.registry import MODELS

ROI_LAYERS = ("RoIAlign", "RoIPool")
LEVEL_MAPPINGS = ("mmdet", "torchvision")


def _check_roi_layer(roi_layer: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(roi_layer, dict) or "type" not in roi_layer:
        raise ValueError(f"SingleRoIExtractor: roi_layer must be a dict with a type, e.g. {{type: RoIAlign, "
                         f"output_size: 7, sampling_ratio: 0, aligned: true}}, got {roi_layer!r}")
    cfg = dict(roi_layer)
    kind = cfg.pop("type")
    if kind not in ROI_LAYERS:
        raise ValueError(f"SingleRoIExtractor: roi_layer.type={kind!r} is not supported; accepted: {list(ROI_LAYERS)}")
    accepted = {"output_size", "sampling_ratio", "aligned"} if kind == "RoIAlign" else {"output_size"}
    unknown = sorted(set(cfg) - accepted)
    missing = sorted(accepted - set(cfg))
    if unknown or missing:
        raise ValueError(f"SingleRoIExtractor: roi_layer of type {kind} needs exactly the keys {sorted(accepted)}; "
                         f"unknown: {unknown}, missing: {missing}")
    size = cfg["output_size"]
    size = (size, size) if isinstance(size, int) else tuple(size)
    if len(size) != 2 or any(not isinstance(s, int) or s < 1 for s in size):
        raise ValueError(f"SingleRoIExtractor: roi_layer.output_size must be a positive int or [h, w], got {size!r}")
    if kind == "RoIPool":
        return dict(type=kind, output_size=size)
    return dict(type=kind, output_size=size, sampling_ratio=int(cfg["sampling_ratio"]), aligned=bool(cfg["aligned"]))


@MODELS.register_module()
class SingleRoIExtractor(nn.Module):
    """RoI features from a feature pyramid: each RoI is pooled from one level chosen by its scale.

    Level mapping (``s = sqrt(w * h)`` of the RoI in input pixels, ``L`` levels):

    - ``'mmdet'`` (MMDetection's ``map_roi_levels``): ``floor(log2(s / finest_scale + 1e-6))`` clamped to
      ``[0, L - 1]``; with ``finest_scale = 56``, RoIs under 112 px go to the finest level.
    - ``'torchvision'`` (torchvision's ``LevelMapper``, FPN paper eq. 1): ``floor(canonical_level +
      log2(s / canonical_scale) + 1e-6)`` clamped to ``[k_min, k_max]`` minus ``k_min``, where ``k_min``,
      ``k_max`` are log2 of the first and last stride. torchvision pools with ``sampling_ratio=2`` and
      ``aligned=False``: set them in ``roi_layer``.

    Args:
        out_channels: channels of every level (given by the RoI head from the neck).
        featmap_strides: stride of each level used, finest first (the RoI head gives the neck's first four,
            P2-P5, as MMDetection and torchvision pool: P6 serves only the RPN).
        roi_layer: ``{type: RoIAlign, output_size: 7, sampling_ratio: 0, aligned: true}`` (``sampling_ratio``
            0: adaptive, ``ceil(roi_size / output_size)`` samples per bin; ``aligned``: the half-pixel shift of
            Detectron2/MMDetection) or ``{type: RoIPool, output_size: 7}``.
        finest_scale: scale of the finest level in the ``'mmdet'`` mapping.
        level_mapping: ``'mmdet'`` or ``'torchvision'``.
        canonical_scale, canonical_level: the ``'torchvision'`` mapping's 224 and 4.

    ``forward(feats, rois)``: ``feats`` the pyramid (at least ``len(featmap_strides)`` maps
    ``[B, out_channels, H_l, W_l]``; extra ones are not used), ``rois`` float ``[R, 5]`` rows
    ``(batch_idx, x1, y1, x2, y2)`` in input pixels -> float32 ``[R, out_channels, *output_size]``.
    Pooling runs in float32 also under autocast (an fp16 bilinear sample of a large map loses precision).
    """

    def __init__(
        self,
        out_channels: int,
        featmap_strides: Sequence[int],
        roi_layer: dict[str, Any],
        finest_scale: float = 56,
        level_mapping: str = "mmdet",
        canonical_scale: float = 224,
        canonical_level: int = 4,
    ) -> None:
        super().__init__()
        if not isinstance(out_channels, int) or isinstance(out_channels, bool) or out_channels < 1:
            raise ValueError(f"SingleRoIExtractor: out_channels must be a positive int, got {out_channels!r}")
        if isinstance(featmap_strides, (int, float)) or not featmap_strides:
            raise ValueError(f"SingleRoIExtractor: featmap_strides must be a non-empty list, got {featmap_strides!r}")
        strides = [int(s) for s in featmap_strides]
        if any(s < 1 for s in strides) or strides != sorted(set(strides)):
            raise ValueError(f"SingleRoIExtractor: featmap_strides={strides} must be positive and increasing")
        if level_mapping not in LEVEL_MAPPINGS:
            raise ValueError(
                f"SingleRoIExtractor: level_mapping={level_mapping!r} is invalid; accepted: {list(LEVEL_MAPPINGS)}"
            )
        if level_mapping == "torchvision" and any(s & (s - 1) for s in strides):
            raise ValueError(
                f"SingleRoIExtractor: level_mapping 'torchvision' needs power-of-two strides, got {strides}"
            )
        if finest_scale <= 0 or canonical_scale <= 0:
            raise ValueError(
                f"SingleRoIExtractor: finest_scale ({finest_scale!r}) and canonical_scale ({canonical_scale!r}) "
                "must be > 0"
            )
        self.roi_layer = _check_roi_layer(roi_layer)
        self.out_channels = out_channels
        self.featmap_strides = strides
        self.finest_scale = float(finest_scale)
        self.level_mapping = level_mapping
        self.canonical_scale = float(canonical_scale)
        self.canonical_level = int(canonical_level)

    @property
    def num_inputs(self) -> int:
        """Number of pyramid levels pooled from."""
        return len(self.featmap_strides)

    @property
    def output_size(self) -> tuple[int, int]:
        return self.roi_layer["output_size"]

    def map_roi_levels(self, rois: Tensor) -> Tensor:
        """Pyramid level of each RoI.

        Args:
            rois: ``[R, 5]`` ``(batch_idx, x1, y1, x2, y2)`` (or ``[R, 4]`` boxes).

        Returns:
            int64 ``[R]`` in ``[0, num_inputs - 1]`` (see the class docstring for the two rules).
        """
        boxes = rois[:, -4:].float()
        scale = torch.sqrt((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]))
        if self.level_mapping == "mmdet":
            levels = torch.floor(torch.log2(scale / self.finest_scale + 1e-6))
            return levels.clamp(min=0, max=self.num_inputs - 1).long()
        k_min = int(math.log2(self.featmap_strides[0]))
        k_max = int(math.log2(self.featmap_strides[-1]))
        levels = torch.floor(self.canonical_level + torch.log2(scale / self.canonical_scale) + 1e-6)
        return (levels.clamp(min=k_min, max=k_max) - k_min).long()

    def _pool(self, feat: Tensor, rois: Tensor, stride: int) -> Tensor:
        layer = self.roi_layer
        if layer["type"] == "RoIPool":
            return roi_pool(feat, rois, layer["output_size"], spatial_scale=1.0 / stride)
        return roi_align(feat, rois, layer["output_size"], spatial_scale=1.0 / stride,
                         sampling_ratio=layer["sampling_ratio"], aligned=layer["aligned"])

    def forward(self, feats: Sequence[Tensor], rois: Tensor) -> Tensor:
        if isinstance(feats, Tensor):
            feats = (feats,)
        if len(feats) < self.num_inputs:
            raise ValueError(
                f"SingleRoIExtractor: got {len(feats)} feature maps, needs {self.num_inputs} "
                f"(featmap_strides={self.featmap_strides})"
            )
        if rois.dim() != 2 or rois.shape[1] != 5:
            raise ValueError(f"SingleRoIExtractor: rois must be [R, 5] (batch_idx, x1, y1, x2, y2), got "
                             f"{tuple(rois.shape)}")
        feats = feats[: self.num_inputs]
        channels = feats[0].shape[1]
        out = feats[0].new_zeros((rois.shape[0], channels, *self.output_size), dtype=torch.float32)
        if rois.shape[0] == 0:
            return out
        rois = rois.float()
        with torch.autocast(device_type=rois.device.type, enabled=False):
            if self.num_inputs == 1:
                return self._pool(feats[0].float(), rois, self.featmap_strides[0])
            levels = self.map_roi_levels(rois)
            for level, (feat, stride) in enumerate(zip(feats, self.featmap_strides)):
                idx = torch.nonzero(levels == level).flatten()
                if idx.numel():
                    out[idx] = self._pool(feat.float(), rois[idx], stride)
        return out
