"""Feature Pyramid Network (Lin et al. 2017) as MMDetection's ``FPN``, with torchvision's parameter names.

Lateral 1x1 convs bring every used backbone map to ``out_channels``; a top-down pass adds each level's
nearest-upsampled coarser lateral; a 3x3 conv smooths every sum. Levels beyond the backbone's come from
max-pooling (kernel 1, stride 2) the last output, or from stride-2 3x3 convs (``add_extra_convs``).

Modules are named as in torchvision's ``FeaturePyramidNetwork`` (``inner_blocks.{i}.0`` = lateral 1x1,
``layer_blocks.{i}.0`` = output 3x3), so its weights load after :func:`fpn_keys_from_torchvision`, which only
strips a model prefix and renames RetinaNet's ``extra_blocks.p6/p7``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn

from detection.registry import MODELS
from oars.models.layers import ConvNormAct

EXTRA_CONV_SOURCES = ("on_input", "on_lateral", "on_output")


def _extra_source(add_extra_convs: bool | str) -> str | None:
    if add_extra_convs is False or add_extra_convs is None:
        return None
    if add_extra_convs is True:  # mmdet: True means 'on_input'
        return "on_input"
    if isinstance(add_extra_convs, str) and add_extra_convs in EXTRA_CONV_SOURCES:
        return add_extra_convs
    raise ValueError(
        f"FPN: add_extra_convs={add_extra_convs!r} is invalid; expected false (max-pool extra levels), true "
        f"(= 'on_input') or one of {list(EXTRA_CONV_SOURCES)}"
    )


@MODELS.register_module()
class FPN(nn.Module):
    """Feature Pyramid Network (MMDetection semantics).

    Args:
        in_channels: channels of the backbone's maps, shallowest first (ResNet-50: ``[256, 512, 1024, 2048]``);
            inferred from the backbone by the detector.
        out_channels: channels of every output level.
        num_outs: number of outputs; those beyond the used backbone levels are extra levels.
        start_level: index of the first backbone map used (RetinaNet: 1, i.e. from C3).
        end_level: index of the last backbone map used, inclusive (-1: the last one).
        add_extra_convs: how the extra levels are made. ``False``: max-pool (kernel 1, stride 2) of the last
            output, as torchvision's ``LastLevelMaxPool`` (Faster R-CNN's P6). Else stride-2 3x3 convs whose first
            input is ``'on_input'`` (the last used backbone map; ``True`` means this), ``'on_lateral'`` (its
            lateral) or ``'on_output'`` (the last FPN output); later extra convs take the previous extra level.
        relu_before_extra_convs: ReLU before every extra conv after the first (RetinaNet's P7 in torchvision, FCOS).
        in_strides: strides of the backbone's maps (given by the detector); default ``4 * 2**i`` (ResNet's C2-C5).
        norm, act: optional norm / activation specs of every conv (none by default, as in the paper).

    Attributes:
        out_channels (list[int]): ``num_outs`` times ``out_channels``, read by the detector for the heads.
        out_strides (list[int]): strides of the outputs (extra levels double the last one).

    ``forward`` takes the backbone's maps (a sequence, shallowest first, all ``len(in_channels)`` of them) and
    returns a tuple of ``num_outs`` maps ``[B, out_channels, H_l, W_l]``, finest first.
    """

    def __init__(
        self,
        in_channels: Sequence[int],
        out_channels: int,
        num_outs: int,
        start_level: int = 0,
        end_level: int = -1,
        add_extra_convs: bool | str = False,
        relu_before_extra_convs: bool = False,
        in_strides: Sequence[int] | None = None,
        norm: Any = None,
        act: Any = None,
    ) -> None:
        super().__init__()
        if isinstance(in_channels, int) or not in_channels:
            raise ValueError(f"FPN: in_channels must be a non-empty list (one per backbone map), got {in_channels!r}")
        in_channels = [int(c) for c in in_channels]
        if any(c <= 0 for c in in_channels):
            raise ValueError(f"FPN: in_channels must all be positive, got {in_channels}")
        if not isinstance(out_channels, int) or isinstance(out_channels, bool) or out_channels <= 0:
            raise ValueError(f"FPN: out_channels must be a positive int (one for all levels), got {out_channels!r}")
        num_ins = len(in_channels)
        if not 0 <= start_level < num_ins:
            raise ValueError(f"FPN: start_level={start_level} must index one of the {num_ins} backbone maps")
        end = num_ins - 1 if end_level == -1 else end_level
        if not start_level <= end < num_ins:
            raise ValueError(
                f"FPN: end_level={end_level} must be -1 or in [start_level={start_level}, {num_ins - 1}] "
                f"({num_ins} backbone maps)"
            )
        num_used = end - start_level + 1
        if not isinstance(num_outs, int) or num_outs < num_used:
            raise ValueError(
                f"FPN: num_outs={num_outs!r} must be an int >= the {num_used} backbone levels it uses "
                f"(start_level={start_level}, end_level={end_level})"
            )
        if in_strides is None:
            in_strides = [4 * 2**i for i in range(num_ins)]
        in_strides = [int(s) for s in in_strides]
        if len(in_strides) != num_ins:
            raise ValueError(f"FPN: in_strides={in_strides} must have {num_ins} entries, one per backbone map")
        self.extra_source = _extra_source(add_extra_convs)
        self.in_channels = in_channels
        self.start_level = start_level
        self.end_level = end  # inclusive index of the last used backbone map
        self.num_outs = num_outs
        self.relu_before_extra_convs = bool(relu_before_extra_convs)
        num_extra = num_outs - num_used
        used_strides = in_strides[start_level : end + 1]
        self.out_channels = [out_channels] * num_outs
        self.out_strides = used_strides + [used_strides[-1] * 2 ** (i + 1) for i in range(num_extra)]

        self.inner_blocks = nn.ModuleList(
            ConvNormAct(c, out_channels, 1, norm=norm, act=act) for c in in_channels[start_level : end + 1]
        )
        self.layer_blocks = nn.ModuleList(
            ConvNormAct(out_channels, out_channels, 3, norm=norm, act=act) for _ in range(num_used)
        )
        self.extra_convs = nn.ModuleList()
        if self.extra_source is not None:
            for i in range(num_extra):
                c = in_channels[end] if i == 0 and self.extra_source == "on_input" else out_channels
                self.extra_convs.append(ConvNormAct(c, out_channels, 3, stride=2, norm=norm, act=act))
        self.init_weights()

    def init_weights(self) -> None:
        """Xavier-uniform conv weights and zero biases (MMDetection's FPN ``init_cfg``); norms at (1, 0)."""
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)) and m.weight is not None:
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, feats: Sequence[Tensor]) -> tuple[Tensor, ...]:
        """Backbone maps (all of them, shallowest first) -> ``num_outs`` maps ``[B, out_channels, H_l, W_l]``."""
        if isinstance(feats, Tensor) or len(feats) != len(self.in_channels):
            got = "one tensor" if isinstance(feats, Tensor) else f"{len(feats)} maps"
            raise ValueError(
                f"FPN: got {got}, built for {len(self.in_channels)} backbone maps (in_channels={self.in_channels})"
            )
        used = feats[self.start_level : self.end_level + 1]
        laterals = [inner(x) for inner, x in zip(self.inner_blocks, used)]
        for i in range(len(laterals) - 1, 0, -1):
            up = F.interpolate(laterals[i], size=laterals[i - 1].shape[-2:], mode="nearest")
            laterals[i - 1] = laterals[i - 1] + up
        outs = [layer(x) for layer, x in zip(self.layer_blocks, laterals)]
        num_extra = self.num_outs - len(outs)
        if num_extra and self.extra_source is None:
            for _ in range(num_extra):
                outs.append(F.max_pool2d(outs[-1], kernel_size=1, stride=2))
        elif num_extra:
            source = {"on_input": feats[self.end_level], "on_lateral": laterals[-1], "on_output": outs[-1]}
            outs.append(self.extra_convs[0](source[self.extra_source]))
            for conv in self.extra_convs[1:]:
                outs.append(conv(F.relu(outs[-1]) if self.relu_before_extra_convs else outs[-1]))
        return tuple(outs)


_TV_BLOCK = re.compile(r"(?:^|\.)(inner_blocks|layer_blocks)\.(\d+)\.(?:0\.)?(weight|bias)$")
_TV_NORM = re.compile(r"(?:^|\.)(inner_blocks|layer_blocks)\.(\d+)\.1\.(\w+)$")
_TV_EXTRA = re.compile(r"(?:^|\.)extra_blocks\.p([67])\.(weight|bias)$")


def fpn_keys_from_torchvision(state_dict: Mapping[str, Any]) -> dict[str, Any]:
    """Rename the FPN part of a torchvision state dict to this :class:`FPN`'s parameter names.

    Accepts a ``torchvision.ops.FeaturePyramidNetwork``'s own state dict or a whole detection model's (keys
    under ``backbone.fpn.``); keys that are not the FPN's are dropped. ``inner_blocks.{i}.0.*`` and
    ``layer_blocks.{i}.0.*`` (``.1.*`` for a norm layer; older torchvision without the ``.0``) keep their names;
    RetinaNet's ``extra_blocks.p6/p7`` (``LastLevelP6P7``) become ``extra_convs.0/1.0``.
    ``LastLevelMaxPool`` has no weights (``add_extra_convs=False`` here).

    Args:
        state_dict: torchvision parameter name -> tensor.

    Returns:
        dict: this FPN's parameter name -> the same tensor, for ``FPN.load_state_dict``. Build the FPN with
        ``in_channels`` of the levels torchvision used (``start_level`` skips the others).

    Raises:
        ValueError: no FPN key found.
    """
    out: dict[str, Any] = {}
    for key, value in state_dict.items():
        if m := _TV_BLOCK.search(key):
            out[f"{m[1]}.{m[2]}.0.{m[3]}"] = value
        elif m := _TV_NORM.search(key):
            out[f"{m[1]}.{m[2]}.1.{m[3]}"] = value
        elif m := _TV_EXTRA.search(key):
            out[f"extra_convs.{int(m[1]) - 6}.0.{m[2]}"] = value
    if not out:
        raise ValueError(
            "fpn_keys_from_torchvision: no FPN key (inner_blocks.*, layer_blocks.*, extra_blocks.p6/p7) in the "
            f"state dict; first keys: {list(state_dict)[:5]}"
        )
    return out
