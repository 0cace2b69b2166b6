"""Turn a network's gradients off for the other network's optimisation step."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn


@contextmanager
def requires_grad_off(*modules: nn.Module | None) -> Iterator[None]:
    """Within the block, every parameter of ``modules`` has ``requires_grad=False``; afterwards each gets back its
    own previous flag (a parameter frozen on purpose stays frozen).

    Why: in the generator step the loss flows through the discriminator; with its gradients on, they would
    accumulate in its ``.grad`` and be applied by its next step (and cost a backward through its weights).
    """
    saved = [(p, p.requires_grad) for m in modules if m is not None for p in m.parameters()]
    for p, _ in saved:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, flag in saved:
            p.requires_grad_(flag)
