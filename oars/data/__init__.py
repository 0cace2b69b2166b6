"""Shared data pieces. Importing this package registers the core transforms."""

from oars.data import transforms  # noqa: F401  (registers into oars.registry.TRANSFORMS)
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
