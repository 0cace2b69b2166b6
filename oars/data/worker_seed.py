"""Seeding of DataLoader workers that keeps augmentation reproducible across epochs and resumes.

mmengine seeds every worker with ``seed + worker_id`` each time workers start, so every epoch
repeats the same augmentation stream, and a resumed run cannot match an uninterrupted one.
PyTorch gives each worker ``base_seed + worker_id`` as its torch seed, where ``base_seed`` is
drawn from the main process's generator at every ``iter(loader)``; the main generator is part of
what oars saves and restores, so seeding NumPy and ``random`` from it makes worker randomness
depend on the epoch and survive a resume.
"""

from __future__ import annotations

import os
import random

import numpy as np
import torch

from oars.registry import FUNCTIONS


@FUNCTIONS.register_module()
def seeded_worker_init_fn(worker_id: int) -> None:
    """Seed NumPy and ``random`` in a worker from its torch seed (and the process rank)."""
    rank = int(os.environ.get("RANK", 0))
    seed = (torch.initial_seed() + 1_000_003 * rank) % 2**32
    np.random.seed(seed)
    random.seed(seed)
