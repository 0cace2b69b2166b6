"""torchvision's SSD / SSDLite input transform as a data preprocessor: normalise, then resize to a fixed size.

torchvision's ``SSD`` uses ``GeneralizedRCNNTransform(fixed_size=(300, 300), size_divisible=1)``: each image is
normalised and bilinearly resized to exactly that size, whatever its aspect ratio (SSDLite: 320 x 320), and the
detections are scaled back per axis. The ``torchvision`` SSD presets load images at their original size and
resize here, as :class:`TorchvisionRCNNPreprocessor` does for the R-CNNs.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch.nn.functional as F
from torch import Tensor

from detection.registry import MODELS

from .torchvision_preprocessor import TORCHVISION_MEAN, TORCHVISION_STD, TorchvisionRCNNPreprocessor


@MODELS.register_module()
class TorchvisionSSDPreprocessor(TorchvisionRCNNPreprocessor):
    """uint8 ``[3, H, W]`` images at their original size -> a ``[B, 3, size_h, size_w]`` float32 batch as torchvision's
    SSD builds it (``(x / pixel_scale - mean) / std``, then ``F.interpolate`` bilinear, ``align_corners=False``, to
    ``fixed_size``). Metainfo and training targets are updated as in :class:`TorchvisionRCNNPreprocessor`
    (``scale_factor`` per axis ``size / original``).

    Args:
        fixed_size: ``(H, W)`` every image is resized to (SSD300: 300 x 300; SSDLite: 320 x 320).
        mean, std, bgr_to_rgb, pixel_scale: as :class:`TorchvisionRCNNPreprocessor` (SSD300: mean 0.48235,
            0.45882, 0.40784 and std 1/255; SSDLite: 0.5 and 0.5).
    """

    def __init__(
        self,
        fixed_size: Sequence[int] = (300, 300),
        mean: Sequence[float] = TORCHVISION_MEAN,
        std: Sequence[float] = TORCHVISION_STD,
        bgr_to_rgb: bool = True,
        pixel_scale: float = 255.0,
        non_blocking: bool = False,
    ) -> None:
        size = [int(s) for s in fixed_size]
        if len(size) != 2 or min(size) < 1:
            raise ValueError(f"TorchvisionSSDPreprocessor: fixed_size must be (H, W) > 0, got {fixed_size!r}")
        super().__init__(mean=mean, std=std, bgr_to_rgb=bgr_to_rgb, pixel_scale=pixel_scale, min_size=min(size),
                         max_size=max(size), pad_size_divisor=1, non_blocking=non_blocking)
        self.fixed_size = (size[0], size[1])

    def resize(self, image: Tensor, min_size: int) -> Tensor:
        """One normalised float image ``[3, H, W]`` -> ``[3, *fixed_size]`` (``min_size`` is unused)."""
        return F.interpolate(image[None], size=self.fixed_size, mode="bilinear", align_corners=False)[0]
