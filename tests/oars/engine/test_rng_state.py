"""Generator states survive a round trip through a weights-only checkpoint."""

import random

import numpy as np
import torch

from oars.engine.checkpoint import load_checkpoint_file
from oars.engine.hooks import capture_rng_state, restore_rng_state


def _draw():
    return random.random(), float(np.random.rand()), float(torch.rand(1))


def test_round_trip_through_checkpoint(tmp_path):
    random.seed(1)
    np.random.seed(1)
    torch.manual_seed(1)
    _draw()
    path = tmp_path / "rng.pth"
    torch.save({"meta": {"rng_state": capture_rng_state()}}, path)
    expected = [_draw() for _ in range(3)]
    random.seed(99)
    np.random.seed(99)
    torch.manual_seed(99)
    restore_rng_state(load_checkpoint_file(path)["meta"]["rng_state"])
    assert [_draw() for _ in range(3)] == expected
