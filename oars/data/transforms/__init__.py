"""Core pipeline transforms, registered in ``oars.registry.TRANSFORMS`` (shared by every task)."""

from oars.data.transforms.albu import RESULTS_TO_ALBU, Albu, AlbuAdapter, build_albu_transform, run_albu
from oars.data.transforms.geometric import Pad, RandomCrop, RandomFlip, RandomResize, Resize, rescale_size
from oars.data.transforms.geometric_extra import (
    RandomAffine,
    RandomHorizontalFlip,
    RandomPaddingCrop,
    RandomRotation,
    RandomScaleAspect,
    RandomVerticalFlip,
)
from oars.data.transforms.loading import LoadImageFromFile
from oars.data.transforms.photometric import Normalize, PhotoMetricDistortion
from oars.data.transforms.photometric_extra import RandomBlur, RandomDistort, RandomNoise
from oars.data.transforms.resize_policies import ResizeByLong, ResizeByShort, ResizeRangeScaling, ResizeStepScaling

__all__ = [
    'RESULTS_TO_ALBU',
    'Albu',
    'AlbuAdapter',
    'LoadImageFromFile',
    'Normalize',
    'Pad',
    'PhotoMetricDistortion',
    'RandomAffine',
    'RandomBlur',
    'RandomCrop',
    'RandomDistort',
    'RandomFlip',
    'RandomHorizontalFlip',
    'RandomNoise',
    'RandomPaddingCrop',
    'RandomResize',
    'RandomRotation',
    'RandomScaleAspect',
    'RandomVerticalFlip',
    'Resize',
    'ResizeByLong',
    'ResizeByShort',
    'ResizeRangeScaling',
    'ResizeStepScaling',
    'build_albu_transform',
    'rescale_size',
    'run_albu',
]
