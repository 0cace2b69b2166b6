"""R(2+1)D (Tran et al., "A Closer Look at Spatiotemporal Convolutions for Action Recognition", CVPR 2018):
a ResNet whose 3x3x3 convolutions are factorised into a 1x3x3 spatial and a 3x1x1 temporal convolution.

Parameter names and module nesting are torchvision's ``torchvision.models.video.r2plus1d_18`` (``stem.0`` ...
``stem.4``, ``layer1.0.conv1.0.0`` spatial conv, ``.conv1.0.1`` its BN, ``.conv1.0.3`` temporal conv,
``.conv1.1`` BN, ``downsample.0``/``.1``), so its state dict loads directly (its ``fc.*`` is the head's: see
``video.models.converters.convert_torchvision_r2plus1d`` for a whole recognizer). The intermediate width M of each
factorised conv is torchvision's: ``(in * planes * 27) // (in * 9 + 3 * planes)``, computed from the block's input
and output widths and used by both of its convs (so the (2+1)D block has about the parameters of a 3x3x3 one).
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm

from oars.models.backbones.base import Backbone
from oars.models.utils import check_frozen_stages
from video.registry import MODELS

from .pretrained import pretrained_init

NORMS_3D: dict[str, type[nn.Module]] = {"BN": nn.BatchNorm3d, "SyncBN": nn.SyncBatchNorm}
DEPTHS: dict[int, tuple[int, int, int, int]] = {18: (2, 2, 2, 2), 34: (3, 4, 6, 3)}


def build_norm3d(norm: str | dict[str, Any], channels: int) -> nn.Module:
    """A 3-d batch norm (``'BN'`` -> BatchNorm3d, ``'SyncBN'``) over ``channels``; a dict adds its keyword args."""
    kwargs = dict(norm) if isinstance(norm, dict) else {"type": norm}
    name = kwargs.pop("type", None)
    if name not in NORMS_3D:
        raise ValueError(f"R2Plus1D: norm={norm!r} is not supported; accepted types: {sorted(NORMS_3D)}")
    return NORMS_3D[name](channels, **kwargs)


def mid_channels(in_planes: int, planes: int) -> int:
    """Width of the (2+1)D factorisation that matches a 3x3x3 conv's parameters (torchvision's formula)."""
    return (in_planes * planes * 27) // (in_planes * 9 + 3 * planes)


class Conv2Plus1D(nn.Sequential):
    """1x3x3 spatial conv (stride 1, s, s) -> norm -> ReLU -> 3x1x1 temporal conv (stride s, 1, 1); no bias."""

    def __init__(self, in_planes: int, out_planes: int, mid: int, stride: int, norm: str | dict[str, Any]) -> None:
        super().__init__(
            nn.Conv3d(in_planes, mid, (1, 3, 3), stride=(1, stride, stride), padding=(0, 1, 1), bias=False),
            build_norm3d(norm, mid),
            nn.ReLU(inplace=True),
            nn.Conv3d(mid, out_planes, (3, 1, 1), stride=(stride, 1, 1), padding=(1, 0, 0), bias=False),
        )


class R2Plus1DBlock(nn.Module):
    """Basic residual block of two (2+1)D convs; the first carries the stride (space and time)."""

    def __init__(self, in_planes: int, planes: int, stride: int, norm: str | dict[str, Any]) -> None:
        super().__init__()
        mid = mid_channels(in_planes, planes)
        self.conv1 = nn.Sequential(Conv2Plus1D(in_planes, planes, mid, stride, norm), build_norm3d(norm, planes),
                                   nn.ReLU(inplace=True))
        self.conv2 = nn.Sequential(Conv2Plus1D(planes, planes, mid, 1, norm), build_norm3d(norm, planes))
        self.downsample = None
        if stride != 1 or in_planes != planes:
            self.downsample = nn.Sequential(nn.Conv3d(in_planes, planes, 1, stride=stride, bias=False),
                                            build_norm3d(norm, planes))
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: Tensor) -> Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(self.conv2(self.conv1(x)) + identity)


@MODELS.register_module()
class R2Plus1D(Backbone):
    """R(2+1)D backbone on clips float [N, 3, T, H, W] -> float [N, 8 * base_channels, T/8, H/16, W/16] (layer4).

    Args:
        depth: 18 (torchvision's ``r2plus1d_18``) or 34.
        base_channels: width of ``layer1`` (64; stages double it). The stem's factorisation width is torchvision's
            45 scaled by ``base_channels / 64``.
        frozen_stages: -1 none, 0 the stem, k the stem and ``layer1..layer{k}``.
        norm: ``'BN'`` (BatchNorm3d) or ``'SyncBN'``, or a dict with ``type`` and its keyword args.
        norm_eval: keep every batch norm in eval mode while training.
        zero_init_residual: zero the last norm weight of each block (each block starts as the identity).
        pretrained: a local checkpoint path (e.g. a torchvision ``r2plus1d_18`` state dict; its ``fc.*`` is skipped),
            shorthand for ``init: {checkpoint: PATH}``; read in ``init_weights``, never downloaded.
        init: ``{checkpoint, prefix, strict}`` (see ``oars.models.utils.load_pretrained``).
    """

    def __init__(self, depth: int = 18, base_channels: int = 64, frozen_stages: int = -1,
                 norm: str | dict[str, Any] = "BN", norm_eval: bool = False, zero_init_residual: bool = False,
                 pretrained: str | None = None, init: dict[str, Any] | None = None) -> None:
        super().__init__()
        if depth not in DEPTHS:
            raise ValueError(f"R2Plus1D: depth={depth!r} is not supported; accepted: {sorted(DEPTHS)}")
        if isinstance(base_channels, bool) or not isinstance(base_channels, int) or base_channels < 4:
            raise ValueError(f"R2Plus1D: base_channels must be an int >= 4, got {base_channels!r}")
        self.depth = depth
        self.frozen_stages = check_frozen_stages("R2Plus1D", frozen_stages, 4)
        self.norm_eval = norm_eval
        stem_mid = max(1, round(45 * base_channels / 64))
        self.stem = nn.Sequential(
            nn.Conv3d(3, stem_mid, (1, 7, 7), stride=(1, 2, 2), padding=(0, 3, 3), bias=False),
            build_norm3d(norm, stem_mid),
            nn.ReLU(inplace=True),
            nn.Conv3d(stem_mid, base_channels, (3, 1, 1), stride=1, padding=(1, 0, 0), bias=False),
            build_norm3d(norm, base_channels),
            nn.ReLU(inplace=True),
        )
        in_planes = base_channels
        for i, num_blocks in enumerate(DEPTHS[depth]):
            planes = base_channels * 2**i
            stride = 1 if i == 0 else 2
            blocks = [R2Plus1DBlock(in_planes, planes, stride, norm)]
            blocks += [R2Plus1DBlock(planes, planes, 1, norm) for _ in range(1, num_blocks)]
            self.add_module(f"layer{i + 1}", nn.Sequential(*blocks))
            in_planes = planes
        self.out_channels = in_planes
        self._init_weights(zero_init_residual)
        self.finish_init(pretrained_init("R2Plus1D", pretrained, init), ["fc."], leaky_slope=None)

    def _init_weights(self, zero_init_residual: bool) -> None:
        """torchvision's: Kaiming-normal (fan_out, ReLU) convs, norms at weight 1 / bias 0."""
        for m in self.modules():
            if isinstance(m, nn.Conv3d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, _BatchNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, R2Plus1DBlock):
                    nn.init.zeros_(m.conv2[1].weight)

    def _frozen_modules(self) -> list[nn.Module]:
        if self.frozen_stages < 0:
            return []
        return [self.stem] + [getattr(self, f"layer{i}") for i in range(1, self.frozen_stages + 1)]

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() != 5:
            raise ValueError(f"R2Plus1D: input must be [N, 3, T, H, W], got {tuple(x.shape)}")
        x = self.stem(x)
        for i in range(1, 5):
            x = getattr(self, f"layer{i}")(x)
        return x


