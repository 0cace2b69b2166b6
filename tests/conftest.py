"""Shared fixtures: a small generated demo data set and overrides that shrink the demo config."""

from __future__ import annotations

import os

import pytest

# oars first: before torch loads libgomp it bounds its spin count (GOMP_SPINCOUNT), as in every oars run
import oars  # noqa: F401

# isort: split
import torch

# `make test` runs two pytest-xdist workers with OMP_NUM_THREADS=1 each (2 cores); a plain `pytest` uses 2 threads.
torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS") or min(2, os.cpu_count() or 1))))


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory) -> str:
    """16 training and 8 validation images of the demo shapes set (128 px)."""
    from oars.data.demo_shapes import generate

    out = tmp_path_factory.mktemp("demo_shapes")
    generate(str(out), num_train=16, num_val=8, size=128, seed=0)
    return str(out)
