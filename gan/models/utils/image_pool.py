"""CycleGAN's history of generated images (Shrivastava et al. 2017): the discriminator sees old fakes too."""

from __future__ import annotations

import torch
from torch import nn


class ImagePool(nn.Module):
    """A buffer of up to ``pool_size`` generated images.

    ``query(images)`` returns a batch of the same shape: while the pool is filling, each image is stored and
    returned as is; once full, each image is, with probability 0.5, swapped with a random stored one (the stored one
    is returned, the new one takes its place), otherwise returned as is. ``pool_size=0`` returns the input.
    Random draws come from torch's global generator (which ``RNGStateHook`` saves in checkpoints), and the stored
    images travel in the model's state dict (``<name>._extra_state``), so a resumed run draws and returns exactly
    what an uninterrupted one would.

    Args:
        pool_size: how many images are kept (50 in CycleGAN).
    """

    def __init__(self, pool_size: int = 50) -> None:
        super().__init__()
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 0:
            raise ValueError(f"ImagePool.pool_size: expected a whole number >= 0, got {pool_size!r}")
        self.pool_size = pool_size
        self.images: torch.Tensor | None = None  # [n, C, H, W], n <= pool_size, detached

    @property
    def num_images(self) -> int:
        return 0 if self.images is None else int(self.images.shape[0])

    @torch.no_grad()
    def query(self, images: torch.Tensor) -> torch.Tensor:
        """[B, C, H, W] fresh fakes -> [B, C, H, W] (a mix of fresh and stored ones), detached."""
        images = images.detach()
        if self.pool_size == 0:
            return images
        if self.images is not None and self.images.shape[1:] != images.shape[1:]:
            raise ValueError(f"ImagePool: images of shape {tuple(images.shape[1:])} but the pool holds "
                             f"{tuple(self.images.shape[1:])}; every batch must have one image size")
        if self.images is not None:
            self.images = self.images.to(device=images.device, dtype=images.dtype)
        out = images.clone()
        for i in range(images.shape[0]):  # per image, not per pixel: the pool's semantics are sequential
            if self.num_images < self.pool_size:
                new = images[i:i + 1].clone()
                self.images = new if self.images is None else torch.cat([self.images, new])
            elif torch.rand(1).item() > 0.5:
                j = int(torch.randint(0, self.pool_size, (1,)).item())
                out[i] = self.images[j]
                self.images[j] = images[i]
        return out

    def get_extra_state(self) -> torch.Tensor:
        """The stored images [n, C, H, W] (an empty tensor while empty): a tensor, as mmengine checkpoints need."""
        return torch.empty(0) if self.images is None else self.images.detach().cpu()

    def set_extra_state(self, state: torch.Tensor) -> None:
        images = state if isinstance(state, torch.Tensor) else None
        self.images = None if images is None or images.numel() == 0 else images.clone()
