"""ResNet with the Temporal Shift Module (TSM, Lin et al. 2019) in every residual branch.

The shared oars :class:`~oars.models.backbones.resnet.ResNet` (torchvision parameter names) with each block's
``conv1`` turned into a :class:`ShiftConv2d` that shifts its input along time first: the "residual shift" of TSM
(the shortcut keeps the unshifted features, so spatial features survive the shift). The weights are the same
parameters under the same names, so ImageNet ResNet checkpoints (``init`` / ``pretrained``) load unchanged.
"""

from __future__ import annotations

from typing import Any

from oars.models.backbones.resnet import ResNet
from video.registry import MODELS

from .pretrained import pretrained_init
from .temporal_shift import ShiftConv2d


@MODELS.register_module()
class ResNetTSM(ResNet):
    """TSM-ResNet on frames float [N*T, 3, H, W] (N clips of T = ``num_segments`` frames, clip-major).

    Args:
        depth: 18, 34, 50, 101 or 152.
        num_segments: frames per clip T (the shift mixes neighbouring frames of one clip; the batch must hold a
            multiple of T frames). The recognizer reads it as its frames per view.
        shift_div: ``C // shift_div`` channels shift each way (default 8: 1/8 forward, 1/8 backward in time).
        out_indices: stages to return (default only ``layer4``, what the head uses; later stages are not built).
        pretrained: a local checkpoint path (shorthand for ``init: {checkpoint: PATH}``), read in ``init_weights``.
        init, and the rest: see :class:`~oars.models.backbones.resnet.ResNet`.

    Returns (forward): a tuple of float [N*T, C_i, H_i, W_i], one per ``out_indices`` entry.
    """

    def __init__(self, depth: int = 50, num_segments: int = 8, shift_div: int = 8, out_indices: Any = (3,),
                 pretrained: str | None = None, init: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if isinstance(num_segments, bool) or not isinstance(num_segments, int) or num_segments < 1:
            raise ValueError(f"ResNetTSM: num_segments must be a positive int (frames per clip), got {num_segments!r}")
        if isinstance(shift_div, bool) or not isinstance(shift_div, int) or shift_div < 2:
            raise ValueError(f"ResNetTSM: shift_div must be an int >= 2 (C // shift_div channels move each way), "
                             f"got {shift_div!r}")
        super().__init__(depth, out_indices=out_indices, init=pretrained_init("ResNetTSM", pretrained, init),
                         **kwargs)
        self.num_segments = num_segments
        self.shift_div = shift_div
        for name in self.stage_names:
            for block in getattr(self, name):
                block.conv1 = ShiftConv2d.from_conv(block.conv1, num_segments, shift_div)
