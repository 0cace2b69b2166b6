"""The temporal shift of TSM (Lin et al., "TSM: Temporal Shift Module for Efficient Video Understanding", 2019)."""

from __future__ import annotations

import torch
from torch import nn


def temporal_shift(x: torch.Tensor, num_segments: int, shift_div: int = 8) -> torch.Tensor:
    """Shift a fraction of the channels one step along time, zero-filling the ends.

    Args:
        x: float [N*T, C, H, W] frames of N clips of T = ``num_segments`` frames each (clip-major).
        num_segments: T.
        shift_div: ``fold = C // shift_div`` channels move each way: the first ``fold`` channels come from the
            next frame (t <- t+1), the next ``fold`` from the previous frame (t <- t-1), the rest stay. TSM's
            default 8 moves 1/8 of the channels in each direction, 1/4 in all (the paper's Fig. 6 optimum, the
            official code's ``fold_div=8`` and MMAction2's ``shift_div=8``).

    Returns:
        float [N*T, C, H, W]: ``out[n, t, :fold] = x[n, t+1, :fold]`` (0 at t = T-1), ``out[n, t, fold:2*fold] =
        x[n, t-1, fold:2*fold]`` (0 at t = 0), the other channels unchanged.

    Written with slicing and ``torch.cat`` (no in-place writes), so that tracing and ONNX export see the same
    graph as eager mode.
    """
    nt, c, h, w = x.shape
    if nt % num_segments:
        raise ValueError(f"temporal_shift: {nt} frames is not a multiple of num_segments={num_segments}")
    fold = c // shift_div
    x = x.reshape(nt // num_segments, num_segments, c, h, w)
    zeros = torch.zeros_like(x[:, :1, :fold])
    from_next = torch.cat((x[:, 1:, :fold], zeros), dim=1)
    from_prev = torch.cat((zeros, x[:, :-1, fold:2 * fold]), dim=1)
    return torch.cat((from_next, from_prev, x[:, :, 2 * fold:]), dim=2).reshape(nt, c, h, w)


class ShiftConv2d(nn.Conv2d):
    """A ``Conv2d`` that applies :func:`temporal_shift` to its input first.

    Why a conv subclass and not a wrapper module: the parameters keep the conv's own names (``conv1.weight``), so
    ImageNet ResNet checkpoints (torchvision names) load unchanged into a TSM backbone.
    """

    num_segments: int
    shift_div: int

    @classmethod
    def from_conv(cls, conv: nn.Conv2d, num_segments: int, shift_div: int) -> ShiftConv2d:
        """The same convolution (sharing ``conv``'s weight and bias parameters) with the shift in front."""
        new = cls(conv.in_channels, conv.out_channels, conv.kernel_size, stride=conv.stride, padding=conv.padding,
                  dilation=conv.dilation, groups=conv.groups, bias=conv.bias is not None,
                  padding_mode=conv.padding_mode, device=conv.weight.device, dtype=conv.weight.dtype)
        new.weight = conv.weight
        new.bias = conv.bias
        new.num_segments = num_segments
        new.shift_div = shift_div
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(temporal_shift(x, self.num_segments, self.shift_div))

    def pruning_trace_forward(self, x: torch.Tensor) -> torch.Tensor:
        """The convolution without the shift, for structured pruning's dependency tracing (oars.compress.prune):
        the shift keeps every channel in place, so it couples no channels, but its slices would hide that."""
        return super().forward(x)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", num_segments={self.num_segments}, shift_div={self.shift_div}"
