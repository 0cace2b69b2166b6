"""Modulated deformable convolution (DCNv2, Zhu et al. 2019) on ``torchvision.ops.deform_conv2d``.

Laid out as mmcv's ``ModulatedDeformConv2dPack`` (and PaddleDetection's ``deformable_conv`` with its offset conv):
the layer owns the convolution's ``weight`` (``[out, in / groups, k, k]``, the same name and shape as the plain
``nn.Conv2d`` it replaces, so a torchvision / mmdet checkpoint's ``conv2.weight`` loads into it) and a child
``conv_offset`` (a plain conv with bias, same kernel / stride / padding / dilation) that predicts, per output
position, ``2 * k * k`` offsets and ``k * k`` mask logits per deformable group. The mask is ``sigmoid(logits)``.

``conv_offset`` starts at zero, as in mmcv and Paddle: the sampling grid starts regular and every mask at
``sigmoid(0) = 0.5``, so a fresh layer computes half the plain convolution with the same weight (the following norm
layer absorbs the scale while training). :func:`modulated_deform_conv` with zero offsets and unit masks is exactly
the plain convolution.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.modules.utils import _pair
from torchvision.ops import deform_conv2d


def modulated_deform_conv(x: Tensor, offset: Tensor, mask: Tensor, weight: Tensor, bias: Tensor | None,
                          stride: int, padding: int, dilation: int) -> Tensor:
    """DCNv2 as a function: ``x`` [B, C, H, W] sampled at the regular grid plus ``offset`` [B, 2*G*k*k, H', W']
    (``(dy, dx)`` per kernel position and deformable group G), each sample scaled by ``mask`` [B, G*k*k, H', W'],
    convolved with ``weight`` [O, C / groups, k, k] (+ ``bias`` [O]). Returns [B, O, H', W']."""
    return deform_conv2d(x, offset, weight, bias, stride=_pair(stride), padding=_pair(padding),
                         dilation=_pair(dilation), mask=mask)


class ModulatedDeformConv2d(nn.Module):
    """A drop-in replacement of ``nn.Conv2d(in, out, k, stride, padding, dilation, groups, bias)`` that learns where
    to sample (DCNv2).

    Args:
        in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias: as ``nn.Conv2d``
            (square kernels; ``groups`` splits the channels of the convolution, e.g. ResNeXt / SENet's 64).
        deform_groups: channel groups that share one set of offsets and masks (1 in DCNv2 backbones).

    ``forward``: [B, in_channels, H, W] float -> [B, out_channels, H', W'] with ``nn.Conv2d``'s output size.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int = 0,
                 dilation: int = 1, groups: int = 1, deform_groups: int = 1, bias: bool = False) -> None:
        super().__init__()
        if in_channels % groups or out_channels % groups or in_channels % deform_groups:
            raise ValueError(f"ModulatedDeformConv2d: in_channels={in_channels} and out_channels={out_channels} must "
                             f"be divisible by groups={groups}, and in_channels by deform_groups={deform_groups}")
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, kernel_size
        self.stride, self.padding, self.dilation = stride, padding, dilation
        self.groups, self.deform_groups = groups, deform_groups
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels // groups, kernel_size, kernel_size))
        self.bias = nn.Parameter(torch.empty(out_channels)) if bias else None
        self.conv_offset = nn.Conv2d(in_channels, deform_groups * 3 * kernel_size * kernel_size, kernel_size,
                                     stride=stride, padding=padding, dilation=dilation, bias=True)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """``nn.Conv2d``'s initialisation for ``weight``/``bias``; zeros for ``conv_offset`` (a regular grid)."""
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            nn.init.zeros_(self.bias)
        nn.init.zeros_(self.conv_offset.weight)
        nn.init.zeros_(self.conv_offset.bias)

    def offset_and_mask(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """The predicted offsets [B, 2*G*k*k, H', W'] and masks in (0, 1) [B, G*k*k, H', W'] for input ``x``."""
        o1, o2, logits = torch.chunk(self.conv_offset(x), 3, dim=1)
        return torch.cat((o1, o2), dim=1), torch.sigmoid(logits)

    def forward(self, x: Tensor) -> Tensor:
        offset, mask = self.offset_and_mask(x)
        return modulated_deform_conv(x, offset, mask, self.weight, self.bias, self.stride, self.padding,
                                     self.dilation)

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}, dilation={self.dilation}, groups={self.groups}, "
                f"deform_groups={self.deform_groups}, bias={self.bias is not None}")


#: ONNX has ``DeformConv`` from opset 19; ONNX Runtime 1.32 runs it (and matches ``deform_conv2d``). An export at
#: a lower opset writes a graph no runtime loads ("No Op registered for DeformConv with domain_version of 18").
DEFORM_CONV_MIN_OPSET = 19


def _dcn_paths(cfg: Any, path: str) -> list[str]:
    """Dotted paths of every ``dcn_stages`` in a config subtree with at least one stage switched on."""
    if isinstance(cfg, Mapping):
        found = [f"{path}.dcn_stages"] if any(cfg.get("dcn_stages") or ()) else []
        return found + [p for k, v in cfg.items() if k != "dcn_stages" for p in _dcn_paths(v, f"{path}.{k}")]
    if isinstance(cfg, (list, tuple)):
        return [p for i, v in enumerate(cfg) for p in _dcn_paths(v, f"{path}[{i}]")]
    return []


def check_deform_conv_export(model_cfg: Mapping[str, Any], opset: int, where: str) -> None:
    """Refuse, before the model is built, an ONNX export at an opset without ``DeformConv`` of a model whose config
    switches deformable convs on (``dcn_stages``).

    Args:
        model_cfg: the config's ``model`` section.
        opset: the ONNX opset asked for (``--opset``).
        where: the config file, for the message.

    Raises:
        ExportError: ``opset`` < 19 and some ``dcn_stages`` has a stage on; the message names the key and the fix.
    """
    paths = _dcn_paths(model_cfg, "model")
    if paths and opset < DEFORM_CONV_MIN_OPSET:
        from oars.export.errors import ExportError  # the export's error type; the layer itself never exports

        raise ExportError(f"{where}: {paths[0]} turns on deformable convolutions (DCNv2), which ONNX has from opset "
                          f"{DEFORM_CONV_MIN_OPSET} (DeformConv); export with --opset {DEFORM_CONV_MIN_OPSET} or "
                          f"later (got --opset {opset}), or set dcn_stages to all false")
