"""C2D ResNet with Non-local blocks (Wang et al. 2018): a 2D ResNet on the frames [N*T, 3, H, W] of N clips, with
embedded-Gaussian non-local blocks after chosen residual blocks attending over each clip's T x H x W positions.

Default placement: the paper's 5-block variant (Table 2b: "to every other residual block", 2 in res3 and 3 in
res4): blocks 1 and 3 of ``layer2`` (res3) and 1, 3 and 5 of ``layer3`` (res4) of a ResNet-50, as MMAction2's
``non_local=((0,0,0),(0,1,0,1),(0,1,0,1,0,1),(0,0,0))``. Unlike the paper's C2D, time is not max-pooled after res2:
T stays the same through every stage (as TSN/TSM), so the head's consensus sees all T frames.

The ResNet's own parameters keep torchvision names (``layer3.1.conv1.weight``); the non-local blocks live apart in
``non_local_blocks`` (keys ``layer{stage}_{block}``), so an ImageNet checkpoint loads into the ResNet and leaves the
non-local blocks at their identity start.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor, nn

from oars.models.backbones.resnet import ARCH_SETTINGS, ResNet
from video.registry import MODELS

from .non_local import NonLocalBlock
from .pretrained import pretrained_init

NON_LOCAL_CFG_KEYS = ("reduction", "sub_sample", "use_scale", "norm")


def every_other_block(depth: int) -> tuple[tuple[int, ...], ...]:
    """The default mask: odd-numbered blocks of ``layer2`` and ``layer3`` (5 blocks for ResNet-50)."""
    layers = ARCH_SETTINGS[depth][1] if depth in ARCH_SETTINGS else (0, 0, 0, 0)
    return tuple(tuple(int(s in (1, 2) and j % 2 == 1) for j in range(n)) for s, n in enumerate(layers))


@MODELS.register_module()
class ResNetNL(ResNet):
    """C2D ResNet with non-local blocks, on frames float [N*T, 3, H, W].

    Args:
        depth: 18, 34, 50, 101 or 152.
        num_segments: frames per clip T (the non-local blocks attend within a clip; the recognizer reads it as its
            frames per view).
        non_local: one 0/1 flag per residual block of each of the 4 stages (1: a non-local block after it); default
            every other block of ``layer2`` and ``layer3`` (see the module docstring).
        non_local_cfg: arguments of :class:`NonLocalBlock`: ``reduction`` (2), ``sub_sample`` (true), ``use_scale``
            (false), ``norm`` (BN).
        out_indices: stages to return (default only ``layer4``).
        pretrained: a local checkpoint path (shorthand for ``init: {checkpoint: PATH}``), read in ``init_weights``.
        init, and the rest: see :class:`~oars.models.backbones.resnet.ResNet`.

    Returns (forward): a tuple of float [N*T, C_i, H_i, W_i], one per ``out_indices`` entry.
    """

    def __init__(self, depth: int = 50, num_segments: int = 8, non_local: Sequence[Sequence[int]] | None = None,
                 non_local_cfg: dict[str, Any] | None = None, out_indices: Any = (3,), pretrained: str | None = None,
                 init: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if isinstance(num_segments, bool) or not isinstance(num_segments, int) or num_segments < 1:
            raise ValueError(f"ResNetNL: num_segments must be a positive int (frames per clip), got {num_segments!r}")
        nl_cfg = dict(non_local_cfg or {})
        unknown = sorted(set(nl_cfg) - set(NON_LOCAL_CFG_KEYS))
        if unknown:
            raise ValueError(f"ResNetNL: non_local_cfg has unknown keys {unknown}; accepted: "
                             f"{list(NON_LOCAL_CFG_KEYS)}")
        super().__init__(depth, out_indices=out_indices, init=pretrained_init("ResNetNL", pretrained, init), **kwargs)
        self.num_segments = num_segments
        mask = every_other_block(depth) if non_local is None else non_local
        layers = ARCH_SETTINGS[depth][1]
        if len(mask) != 4 or any(len(m) != n for m, n in zip(mask, layers)):
            raise ValueError(f"ResNetNL: non_local={[list(m) for m in mask]} must give one 0/1 flag per block of the 4 "
                             f"stages of ResNet-{depth}, i.e. lengths {list(layers)}")
        self.non_local_blocks = nn.ModuleDict()
        for s, name in enumerate(self.stage_names):
            width = self.out_channels_of(s)  # every block of a stage gives the same channels
            for j, flag in enumerate(mask[s]):
                if flag:
                    self.non_local_blocks[f"{name}_{j}"] = NonLocalBlock(width, num_segments, **nl_cfg)
        asked = sum(int(bool(f)) for m in mask[: len(self.stage_names)] for f in m)
        if asked != len(self.non_local_blocks) or any(f for m in mask[len(self.stage_names):] for f in m):
            raise ValueError(f"ResNetNL: non_local flags a stage that out_indices={list(self.out_indices)} does not "
                             "build")

    def out_channels_of(self, stage: int) -> int:
        """Output channels of stage ``stage`` (0-based)."""
        last = getattr(self, self.stage_names[stage])[-1]
        return (last.conv3 if hasattr(last, "conv3") else last.conv2).out_channels

    def forward(self, x: Tensor) -> tuple[Tensor, ...]:
        x = self.forward_stem(x)
        outs = []
        for i, name in enumerate(self.stage_names):
            for j, block in enumerate(getattr(self, name)):
                x = block(x)
                key = f"{name}_{j}"
                if key in self.non_local_blocks:
                    x = self.non_local_blocks[key](x)
            if i in self.out_indices:
                outs.append(x)
        return tuple(outs)
