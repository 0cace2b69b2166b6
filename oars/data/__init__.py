"""Shared data pieces. Importing this package registers the core transforms."""

from oars.data import transforms, worker_seed  # noqa: F401  (registration on import)
from oars.data.transforms import (
    Albu,
    AlbuAdapter,
    LoadImageFromFile,
    Normalize,
    Pad,
    PhotoMetricDistortion,
    RandomCrop,
    RandomFlip,
    RandomResize,
    Resize,
)

__all__ = [
    'Albu',
    'AlbuAdapter',
    'LoadImageFromFile',
    'Normalize',
    'Pad',
    'PhotoMetricDistortion',
    'RandomCrop',
    'RandomFlip',
    'RandomResize',
    'Resize',
]
