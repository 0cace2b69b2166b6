"""Shared data pieces. Importing this package registers the core transforms and the worker seeding."""

from oars.data import transforms, worker_seed  # noqa: F401  (registration on import)
from oars.data.transforms import *  # noqa: F403  (the public transforms, listed once in transforms/__init__)

__all__ = list(transforms.__all__)
