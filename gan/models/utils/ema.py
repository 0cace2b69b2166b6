"""An exponential moving average of the generator's weights, held as a submodule (``generator_ema``)."""

from __future__ import annotations

import torch
from mmengine.model import ExponentialMovingAverage
from torch import nn


class GeneratorEMA(ExponentialMovingAverage):
    """mmengine's :class:`ExponentialMovingAverage` configured the GAN way.

    ``momentum`` here is the share of the average kept per update (0.999 keeps 99.9 %: ``ema = 0.999 * ema + 0.001 *
    generator``), as GAN papers and ``ema_config: {momentum: 0.999}`` state it; mmengine's own ``momentum`` is the
    share of the new weights (its 0.001). Before ``start_iter`` (generator iterations counted by the model) the
    average simply follows the generator. Buffers (BatchNorm statistics) are copied from the generator.
    Its ``steps`` buffer and weights are saved with the model (``generator_ema.module.*``, ``generator_ema.steps``).

    Args:
        generator: the network to average (deep-copied).
        momentum: kept share in (0, 1).
        start_iter: the first training iteration whose update averages.
        interval: average every ``interval`` updates.
    """

    def __init__(self, generator: nn.Module, momentum: float = 0.999, start_iter: int = 0, interval: int = 1) -> None:
        if not isinstance(momentum, (int, float)) or not 0.0 < float(momentum) < 1.0:
            raise ValueError(f"ema_config.momentum: expected the kept share in (0, 1), e.g. 0.999, got {momentum!r}")
        if isinstance(start_iter, bool) or not isinstance(start_iter, int) or start_iter < 0:
            raise ValueError(f"ema_config.start_iter: expected a whole number >= 0, got {start_iter!r}")
        super().__init__(generator, momentum=1.0 - float(momentum), interval=interval, update_buffers=False)
        self.decay = float(momentum)
        self.start_iter = start_iter

    @torch.no_grad()
    def update(self, generator: nn.Module, curr_iter: int) -> None:
        """After the generator step of training iteration ``curr_iter`` (0-based)."""
        if curr_iter < self.start_iter:
            self.sync(generator)
            return
        self.update_parameters(generator)

    @torch.no_grad()
    def sync(self, generator: nn.Module) -> None:
        """Make the average equal to the generator (and restart averaging from it)."""
        self.steps.zero_()
        self.update_parameters(generator)
        self.steps.zero_()
