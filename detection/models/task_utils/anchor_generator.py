"""Anchors of anchor-based heads (RPN, RetinaNet, SSD-style): base anchors per level, tiled over feature maps."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from detection.registry import TASK_UTILS


def _floats(name: str, values: Sequence[float] | None, positive: bool = True) -> list[float] | None:
    if values is None:
        return None
    if isinstance(values, (int, float)) or not len(values):
        raise ValueError(f"AnchorGenerator: {name} must be a non-empty list of numbers, got {values!r}")
    out = [float(v) for v in values]
    if positive and min(out) <= 0:
        raise ValueError(f"AnchorGenerator: {name} must be > 0, got {values!r}")
    return out


@TASK_UTILS.register_module()
class AnchorGenerator:
    """Anchors for a pyramid of feature maps, as MMDetection's ``AnchorGenerator`` (and torchvision's with
    ``round_base_anchors`` and ``strides_from_image``).

    Each level ``l`` has ``A = len(ratios) * len(scales)`` base anchors centred on ``center_offset * stride``:
    width ``base_size * scale / sqrt(ratio)``, height ``base_size * scale * sqrt(ratio)`` (ratio = h / w),
    ratio-major, scale-minor. They are tiled over the feature map position-major, anchor-minor, which is the
    order of ``head_output[B, A*4, H, W].permute(0, 2, 3, 1).reshape(B, -1, 4)``.

    Args:
        strides: the feature stride of each level in pixels, e.g. ``[4, 8, 16, 32, 64]``.
        ratios: anchor aspect ratios h / w, shared by the levels.
        scales: anchor sizes as multiples of ``base_size``; or give ``octave_base_scale`` and
            ``scales_per_octave`` (RetinaNet: ``octave_base_scale * 2 ** (i / scales_per_octave)``).
        base_sizes: base size of each level (default: the stride).
        sizes: per level, the anchor sizes in pixels (torchvision's ``AnchorGenerator(sizes=...)``, e.g.
            RetinaNet's ``[[32, 40, 50], [64, 80, 101], ...]``, whose ``int(x * 2 ** (i / 3))`` no shared
            ``scales`` reproduces); replaces ``scales`` / ``octave_base_scale`` and ``base_sizes``.
        center_offset: anchor centre within a cell, in strides (0: the cell's top-left corner, MMDetection's
            default and torchvision's; 0.5: the cell centre).
        round_base_anchors: round base anchors to whole pixels (torchvision's ``AnchorGenerator`` does).
        strides_from_image: when ``grid_priors`` gets ``image_size``, tile with stride ``image_size // grid``
            per axis instead of ``strides`` (torchvision does: a 13-cell P6 grid of an 800-px image has stride 61).
    """

    def __init__(
        self,
        strides: Sequence[int],
        ratios: Sequence[float],
        scales: Sequence[float] | None = None,
        base_sizes: Sequence[int] | None = None,
        octave_base_scale: float | None = None,
        scales_per_octave: int | None = None,
        center_offset: float = 0.0,
        round_base_anchors: bool = False,
        strides_from_image: bool = False,
        sizes: Sequence[Sequence[float]] | None = None,
    ) -> None:
        strides_f = _floats("strides", strides)
        assert strides_f is not None
        self.strides = [int(s) for s in strides_f]
        self.ratios = _floats("ratios", ratios)
        if sizes is not None:
            if scales is not None or octave_base_scale is not None or base_sizes is not None:
                raise ValueError("AnchorGenerator: sizes replaces scales, octave_base_scale and base_sizes; give one")
            if isinstance(sizes, (int, float)) or len(sizes) != len(strides_f):
                raise ValueError(f"AnchorGenerator: sizes needs one list per level ({len(strides_f)} strides), got "
                                 f"{sizes!r}")
            level_scales = [_floats("sizes", s) for s in sizes]
            scales, base_sizes = level_scales[0], [1] * len(strides_f)
        if scales is not None and octave_base_scale is not None:
            raise ValueError("AnchorGenerator: give either scales or octave_base_scale/scales_per_octave, not both")
        if scales is None:
            if octave_base_scale is None or not scales_per_octave:
                raise ValueError("AnchorGenerator: scales (e.g. [8]) or octave_base_scale + scales_per_octave needed")
            scales = [octave_base_scale * 2 ** (i / scales_per_octave) for i in range(int(scales_per_octave))]
        self.scales = _floats("scales", scales)
        self.base_sizes = [int(b) for b in (_floats("base_sizes", base_sizes) or self.strides)]
        if len(self.base_sizes) != len(self.strides):
            raise ValueError(
                f"AnchorGenerator: {len(self.base_sizes)} base_sizes for {len(self.strides)} strides; "
                "give one per level"
            )
        if not 0.0 <= center_offset < 1.0:
            raise ValueError(f"AnchorGenerator: center_offset must be in [0, 1), got {center_offset!r}")
        self.center_offset = float(center_offset)
        self.round_base_anchors = bool(round_base_anchors)
        self.strides_from_image = bool(strides_from_image)
        if sizes is None:
            level_scales = [self.scales] * len(self.strides)
        if len({len(s) for s in level_scales}) != 1:
            raise ValueError(f"AnchorGenerator: every level needs as many sizes (anchors per position), got {sizes!r}")
        self.level_scales = level_scales
        self.base_anchors = [self._base_anchors(b, sc) for b, sc in zip(self.base_sizes, level_scales)]

    @property
    def num_levels(self) -> int:
        return len(self.strides)

    @property
    def num_base_anchors(self) -> list[int]:
        """``A`` of each level: the anchors at one feature-map position."""
        return [len(b) for b in self.base_anchors]

    def _base_anchors(self, base_size: int, level_scales: Sequence[float]) -> Tensor:
        """``[A, 4]`` float32 anchors of one level around its cell origin, ratio-major then scale-minor."""
        ratios = torch.tensor(self.ratios, dtype=torch.float32)
        scales = torch.tensor(level_scales, dtype=torch.float32)
        h_ratios = torch.sqrt(ratios)
        w_ratios = 1.0 / h_ratios
        ws = (base_size * w_ratios[:, None] * scales[None, :]).reshape(-1)
        hs = (base_size * h_ratios[:, None] * scales[None, :]).reshape(-1)
        center = self.center_offset * base_size
        anchors = torch.stack([center - 0.5 * ws, center - 0.5 * hs, center + 0.5 * ws, center + 0.5 * hs], dim=-1)
        return anchors.round() if self.round_base_anchors else anchors

    def level_strides(self, featmap_sizes: Sequence[tuple[int, int]], image_size: Sequence[int] | None = None
                      ) -> list[tuple[int, int]]:
        """``(stride_h, stride_w)`` of each level: the configured strides, or ``image_size // grid`` per axis when
        ``strides_from_image`` and ``image_size`` (H, W of the padded batch) is given."""
        if self.strides_from_image and image_size is not None:
            return [(int(image_size[0]) // int(h), int(image_size[1]) // int(w)) for h, w in featmap_sizes]
        return [(s, s) for s in self.strides]

    def grid_priors(
        self,
        featmap_sizes: Sequence[tuple[int, int]],
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
        image_size: Sequence[int] | None = None,
    ) -> list[Tensor]:
        """Anchors of every level tiled over its feature map.

        Args:
            featmap_sizes: ``(H_l, W_l)`` of each level, as many as ``strides``.
            device, dtype: of the returned tensors.
            image_size: ``(H, W)`` of the padded input; only used with ``strides_from_image``.

        Returns:
            one ``[H_l * W_l * A_l, 4]`` tensor (xyxy pixels) per level, position-major, anchor-minor.
        """
        if len(featmap_sizes) != self.num_levels:
            raise ValueError(
                f"AnchorGenerator: {len(featmap_sizes)} feature maps but {self.num_levels} strides "
                f"{self.strides}; the head's inputs and anchor_generator.strides must match"
            )
        out = []
        for (h, w), (sh, sw), base in zip(featmap_sizes, self.level_strides(featmap_sizes, image_size),
                                          self.base_anchors):
            shift_x = torch.arange(int(w), device=device, dtype=torch.float32) * sw
            shift_y = torch.arange(int(h), device=device, dtype=torch.float32) * sh
            yy, xx = torch.meshgrid(shift_y, shift_x, indexing="ij")
            shifts = torch.stack([xx, yy, xx, yy], dim=-1).reshape(-1, 1, 4)
            out.append((shifts + base.to(device)[None]).reshape(-1, 4).to(dtype))
        return out

    def valid_flags(self, featmap_sizes: Sequence[tuple[int, int]], pad_shape: Sequence[int],
                    device: torch.device | str = "cpu") -> list[Tensor]:
        """Per level ``[H_l * W_l * A_l]`` bool: the anchor's cell lies inside the un-padded image (``pad_shape``
        here is the image's (H, W) before batch padding), so that padding never yields positives."""
        flags = []
        for (h, w), stride, a in zip(featmap_sizes, self.strides, self.num_base_anchors):
            valid_h = min(int(h), math.ceil(int(pad_shape[0]) / stride))
            valid_w = min(int(w), math.ceil(int(pad_shape[1]) / stride))
            fy = torch.arange(int(h), device=device) < valid_h
            fx = torch.arange(int(w), device=device) < valid_w
            valid = (fy[:, None] & fx[None, :]).reshape(-1, 1).expand(-1, a).reshape(-1)
            flags.append(valid)
        return flags

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(strides={self.strides}, ratios={self.ratios}, scales={self.scales}, "
                f"base_sizes={self.base_sizes}, center_offset={self.center_offset})")
