"""The GAN papers' weight initialisation: N(0, 0.02) convolutions, N(1, 0.02) norm scales."""

from __future__ import annotations

from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules.instancenorm import _InstanceNorm


def gan_normal_init(module: nn.Module, std: float = 0.02) -> None:
    """Conv / transposed conv / linear weights ~ N(0, std), biases 0; affine BatchNorm/InstanceNorm scales
    ~ N(1, std), shifts 0 (Radford et al. 2015, DCGAN; used as well by pix2pix and CycleGAN)."""
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d, nn.Linear)):
            nn.init.normal_(m.weight, 0.0, std)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (_BatchNorm, _InstanceNorm, nn.GroupNorm)) and getattr(m, "weight", None) is not None:
            nn.init.normal_(m.weight, 1.0, std)
            nn.init.zeros_(m.bias)
