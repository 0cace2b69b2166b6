"""Shared data pieces. Importing this package registers the core transforms, the worker seeding, and the streamed
shards (``ShardDataset`` in DATASETS, ``ShardSamplerHook`` in HOOKS: the registries' location for both)."""

from oars.data import shards, transforms, worker_seed  # noqa: F401  (registration on import)
from oars.data.transforms import *  # noqa: F403  (the public transforms, listed once in transforms/__init__)

__all__ = list(transforms.__all__)
