"""What every GAN network shares: the papers' N(0, 0.02) initialisation, then optional pretrained weights."""

from __future__ import annotations

from typing import Any

from torch import nn

from oars.models.utils import check_init, load_pretrained

from .init import gan_normal_init


class GANNetwork(nn.Module):
    """Base of generators and discriminators.

    ``init``: ``{checkpoint: PATH, prefix, strict}`` or None, checked when built and read by :meth:`init_weights`
    (when training starts: evaluation and export build the network on machines without that file).
    """

    def __init__(self, init: dict[str, Any] | None = None, init_std: float = 0.02) -> None:
        super().__init__()
        self._init = check_init(init)
        self.init_std = float(init_std)

    def init_weights(self) -> None:
        """N(0, init_std) conv/linear weights and N(1, init_std) norm scales, then the ``init`` checkpoint if any."""
        gan_normal_init(self, std=self.init_std)
        if self._init is not None:
            load_pretrained(self, self._init, skip_prefixes=())
