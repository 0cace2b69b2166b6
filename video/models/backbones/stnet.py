"""StNet backbone (He et al., "StNet: Local and Global Spatial-Temporal Modeling for Action Recognition",
AAAI 2019; PaddleVideo's ``StNet_ResNet``).

A 2D ResNet reads "super-images": the ``clip_len`` consecutive frames of each of the ``num_clips`` segments of a
view stacked along channels (``3 * clip_len`` input channels, frame-major: frame 0's RGB, frame 1's RGB, ...).
Temporal modelling blocks (a 3x1x1 convolution over the segments with ReLU and batch norm, added to their input)
follow ``layer2`` (res3) and ``layer3`` (res4). The output keeps the segments apart for the temporal Xception
head (:class:`~video.models.heads.stnet_head.StNetHead`).

Parameter names are the shared oars ResNet's (torchvision's), so an ImageNet ResNet state dict loads; its 3-channel
``conv1.weight`` is inflated to ``3 * clip_len`` channels in :meth:`StNet.init_weights`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from mmengine.logging import print_log
from torch import Tensor, nn

from oars.engine.checkpoint import CheckpointError, load_checkpoint_file, state_dict_from_checkpoint
from oars.models.backbones.base import _SKIP_PRETRAINED
from oars.models.backbones.resnet import ResNet
from video.registry import MODELS

from .pretrained import pretrained_init

INFLATE_MODES = ("mean", "repeat")


def inflate_conv1(weight: Tensor, clip_len: int, mode: str = "mean") -> Tensor:
    """Turn a 3-channel (RGB) stem weight [O, 3, k, k] into one for ``clip_len`` stacked frames
    [O, 3 * clip_len, k, k] (frame-major channels).

    ``mean`` (PaddleVideo's): every input channel gets the RGB mean of the filter divided by ``clip_len``, so the
    stem sees the grey average of the stacked frames. ``repeat``: the RGB filter is repeated per frame and divided
    by ``clip_len``, so a still clip (the same frame ``clip_len`` times) gives the 2D network's response.
    """
    if weight.dim() != 4 or weight.shape[1] != 3:
        raise ValueError(f"inflate_conv1: expected a [O, 3, k, k] weight, got {tuple(weight.shape)}")
    if mode == "mean":
        return weight.mean(dim=1, keepdim=True).div(clip_len).repeat(1, 3 * clip_len, 1, 1)
    if mode == "repeat":
        return weight.div(clip_len).repeat(1, clip_len, 1, 1)
    raise ValueError(f"inflate_conv1: mode={mode!r} is not supported; accepted: {list(INFLATE_MODES)}")


class TemporalBlock(nn.Module):
    """StNet's temporal modelling block: ``x + BN(ReLU(Conv3d_{3x1x1}(x)))`` over the segments of each view.

    Args:
        channels: C of the feature map.
        num_clips: segments T per view; the batch holds N*T maps, views-major.
        zero_init: start the batch norm's weight at 0, so that the block is the identity and a pretrained 2D
            network starts unchanged (PaddleVideo starts it at 1).

    ``forward``: float [N*T, C, H, W] -> the same shape.
    """

    def __init__(self, channels: int, num_clips: int, zero_init: bool = True) -> None:
        super().__init__()
        self.num_clips = num_clips
        self.conv = nn.Conv3d(channels, channels, (3, 1, 1), padding=(1, 0, 0), bias=True)
        self.relu = nn.ReLU(inplace=True)
        self.bn = nn.BatchNorm3d(channels)
        nn.init.kaiming_normal_(self.conv.weight, mode="fan_in", nonlinearity="relu")
        nn.init.zeros_(self.conv.bias)
        nn.init.constant_(self.bn.weight, 0.0 if zero_init else 1.0)
        nn.init.zeros_(self.bn.bias)

    def forward(self, x: Tensor) -> Tensor:
        nt, c, h, w = x.shape
        if nt % self.num_clips:
            raise ValueError(f"TemporalBlock: {nt} maps is not a multiple of num_clips={self.num_clips}")
        x5 = x.reshape(nt // self.num_clips, self.num_clips, c, h, w).transpose(1, 2)  # [N, C, T, H, W]
        out = x5 + self.bn(self.relu(self.conv(x5)))
        return out.transpose(1, 2).reshape(nt, c, h, w)


@MODELS.register_module()
class StNet(ResNet):
    """StNet ResNet on super-images of stacked frames.

    Args:
        depth: 50, 101 or 152 (PaddleVideo's choices; 18 and 34 also build, for small tests).
        num_clips: segments T per view (``SampleFrames.num_clips``; real size 7).
        clip_len: consecutive frames N stacked per segment (``SampleFrames.clip_len``; real size 5).
        temporal_stages: after which stages (0 = ``layer1`` ... 3 = ``layer4``) a :class:`TemporalBlock` comes;
            default ``(1, 2)``: after res3 and res4, as the paper.
        temporal_zero_init: see :class:`TemporalBlock` (default True: identity at the start).
        inflate: how :meth:`init_weights` turns a 3-channel pretrained ``conv1`` into ``3 * clip_len`` channels
            (:func:`inflate_conv1`; default ``mean``, PaddleVideo's).
        pretrained: a local checkpoint path (shorthand for ``init: {checkpoint: PATH}``), read in ``init_weights``.
        init, norm, norm_eval, frozen_stages, ...: see :class:`~oars.models.backbones.resnet.ResNet`.

    Input (forward): the frames of N views as ``Recognizer2D`` folds them, float [N * T * clip_len, 3, H, W]
    (views-major, then segments, then frames: ``SampleFrames`` + ``FormatShape('NCHW')`` order), or super-images
    [N * T, 3 * clip_len, H, W].
    Output: a one-tuple with float [N, C, T, h, w] (C = 2048 for ResNet-50, h = H / 32): the last stage with the
    segments as a time axis. ``num_segments`` (= T * clip_len) is what ``Recognizer2D`` reads as frames per view.

    Real size: ``depth=50, num_clips=7, clip_len=5`` with :class:`StNetHead` and 400 classes (Kinetics-400):
    about 33.2 M parameters (backbone 27.5 M: ResNet-50's 23.5 M without fc, 37.6 k more in the 15-channel conv1,
    the two temporal blocks' 0.79 M + 3.15 M; head 5.7 M).
    """

    def __init__(self, depth: int = 50, num_clips: int = 7, clip_len: int = 5,
                 temporal_stages: Sequence[int] = (1, 2), temporal_zero_init: bool = True, inflate: str = "mean",
                 pretrained: str | None = None, init: dict[str, Any] | None = None, **kwargs: Any) -> None:
        for key, value in (("num_clips", num_clips), ("clip_len", clip_len)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"StNet: {key} must be a positive int, got {value!r}")
        if inflate not in INFLATE_MODES:
            raise ValueError(f"StNet: inflate={inflate!r} is not supported; accepted: {list(INFLATE_MODES)}")
        stages = tuple(temporal_stages)
        if any(isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= 3 for s in stages) or \
                len(set(stages)) != len(stages):
            raise ValueError(f"StNet: temporal_stages={list(temporal_stages)!r} must be distinct stage indices "
                             "0..3 (default [1, 2]: after res3 and res4)")
        for key in ("in_channels", "out_indices"):
            if key in kwargs:
                raise ValueError(f"StNet: {key} is fixed (3 * clip_len input channels, the last stage out); "
                                 f"remove {key}={kwargs[key]!r}")
        super().__init__(depth, in_channels=3 * clip_len, out_indices=(3,),
                         init=pretrained_init("StNet", pretrained, init), **kwargs)
        self.num_clips, self.clip_len, self.inflate = num_clips, clip_len, inflate
        self.num_segments = num_clips * clip_len
        self.temporal_stages = stages
        for s in stages:
            last = getattr(self, f"layer{s + 1}")[-1]
            channels = (last.conv3 if hasattr(last, "conv3") else last.conv2).out_channels
            self.add_module(f"temporal{s + 1}", TemporalBlock(channels, num_clips, temporal_zero_init))
        self.out_channels = [self.out_channels[-1]]

    def super_images(self, x: Tensor) -> Tensor:
        """Frames [M * clip_len, 3, H, W] (or super-images [M, 3 * clip_len, H, W]) -> [M, 3 * clip_len, H, W]."""
        n = 3 * self.clip_len
        if x.dim() != 4 or x.shape[1] not in (3, n):
            raise ValueError(f"StNet: input {tuple(x.shape)} is neither frames [N*T*{self.clip_len}, 3, H, W] nor "
                             f"super-images [N*T, {n}, H, W]")
        if x.shape[1] == n:
            return x
        if x.shape[0] % (self.clip_len * self.num_clips):
            raise ValueError(f"StNet: {x.shape[0]} frames is not a multiple of num_clips x clip_len = "
                             f"{self.num_clips} x {self.clip_len}")
        return x.reshape(x.shape[0] // self.clip_len, n, *x.shape[2:])

    def forward(self, x: Tensor) -> tuple[Tensor]:
        x = self.super_images(x)
        if x.shape[0] % self.num_clips:
            raise ValueError(f"StNet: {x.shape[0]} super-images is not a multiple of num_clips={self.num_clips}")
        x = self.forward_stem(x)
        for i, name in enumerate(self.stage_names):
            x = getattr(self, name)(x)
            if i in self.temporal_stages:
                x = getattr(self, f"temporal{i + 1}")(x)
        nt, c, h, w = x.shape
        return (x.reshape(nt // self.num_clips, self.num_clips, c, h, w).transpose(1, 2),)

    def init_weights(self) -> None:
        """Load ``init`` (a local file; when training starts), inflating a 3-channel ``conv1.weight`` (an ImageNet
        ResNet's) to ``3 * clip_len`` channels (:func:`inflate_conv1` with ``inflate``). Keys the file lacks keep
        their initial values: the temporal blocks' are expected to be missing from an ImageNet file (logged at
        INFO), any other is a warning (an error with ``init.strict``).

        Raises:
            CheckpointError: the file is missing or unreadable, no key fits, or ``strict`` and keys differ.
        """
        init, skip = getattr(self, "_pretrained", (None, ()))
        if init is None or _SKIP_PRETRAINED.get():
            return
        path, strict = str(init["checkpoint"]), bool(init.get("strict", False))
        hint = "(read when training starts; give an existing file, or init: null to train from scratch)"
        try:
            state = state_dict_from_checkpoint(load_checkpoint_file(path), init.get("prefix"))
        except CheckpointError as err:
            raise CheckpointError(f"StNet pretrained weights (init.checkpoint): {err} {hint}") from None
        own = self.state_dict()
        state = {k: v for k, v in state.items() if k in own or not k.startswith(tuple(skip))}
        w = state.get("conv1.weight")
        if isinstance(w, Tensor) and w.dim() == 4 and w.shape[1] == 3 and own["conv1.weight"].shape[1] != 3:
            state["conv1.weight"] = inflate_conv1(w, self.clip_len, self.inflate)
        if not any(k in own for k in state):
            raise CheckpointError(f"StNet pretrained weights (init.checkpoint): none of the {len(state)} keys in "
                                  f"{path} match StNet's parameters {hint}")
        mismatched = [f"{k}: {tuple(v.shape)} vs {tuple(own[k].shape)}" for k, v in state.items()
                      if k in own and v.shape != own[k].shape]
        result = self.load_state_dict({k: v for k, v in state.items() if k not in own or v.shape == own[k].shape},
                                      strict=False)
        temporal = tuple(f"temporal{s + 1}." for s in self.temporal_stages)
        missing = [k for k in result.missing_keys if not k.startswith(temporal)]
        expected = len(result.missing_keys) - len(missing)
        if expected:
            print_log(f"StNet: {expected} temporal-block tensors not in {path} keep their initial values",
                      logger="current", level=logging.INFO)
        problems = [f"{what}: {', '.join(keys[:20])}" for what, keys in (
            ("missing keys (kept at their initial values)", missing),
            ("unexpected keys (ignored)", list(result.unexpected_keys)),
            ("shape mismatches (file vs model, skipped)", mismatched)) if keys]
        if problems:
            msg = f"loading {path} into StNet: " + "; ".join(problems)
            if strict:
                raise CheckpointError(msg)
            print_log(msg, logger="current", level=logging.WARNING)
