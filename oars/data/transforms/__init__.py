"""Core pipeline transforms, registered in ``oars.registry.TRANSFORMS`` (shared by every task)."""

from oars.data.transforms.albu import RESULTS_TO_ALBU, Albu, AlbuAdapter, build_albu_transform, run_albu
from oars.data.transforms.geometric import Pad, RandomCrop, RandomFlip, RandomResize, Resize, rescale_size
from oars.data.transforms.loading import LoadImageFromFile
from oars.data.transforms.photometric import Normalize, PhotoMetricDistortion

__all__ = [
    'RESULTS_TO_ALBU',
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
    'build_albu_transform',
    'rescale_size',
    'run_albu',
]
