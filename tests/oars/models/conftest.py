"""Fixtures shared by the backbone tests."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm


def _randomize(model: nn.Module, seed: int = 0) -> nn.Module:
    """Random affine and running statistics in every BN, so a parity test cannot pass on identity BNs."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, _BatchNorm):
                n = m.num_features
                m.weight.copy_(torch.rand(n, generator=gen) * 0.5 + 0.5)
                m.bias.copy_(torch.randn(n, generator=gen) * 0.1)
                m.running_mean.copy_(torch.randn(n, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(n, generator=gen) + 0.5)
                m.num_batches_tracked.fill_(7)
    return model.eval()


@pytest.fixture
def randomize():
    return _randomize


@pytest.fixture
def image():
    return torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(1))


@pytest.fixture()
def pretrained():
    """``pretrained(backbone)``: run its ``init_weights`` (where the ``init`` file is read) and return it."""

    def _load(module: nn.Module) -> nn.Module:
        module.init_weights()
        return module

    return _load
