"""video.transforms: frame sampling, clip-consistent spatial / photometric transforms, formatting and packing.

Registered in ``video.registry.TRANSFORMS`` on import.
"""

from video.transforms.crops import CenterCrop, MultiScaleCrop, RandomResizedCrop, TenCrop, ThreeCrop
from video.transforms.formatting import FormatShape, PackActionInputs, PackFeatureInputs
from video.transforms.localization import GenerateLocalizationLabels, PackLocalizationInputs, ResizeTemporal
from video.transforms.localization_loading import LoadLocalizationFeature, LoadVideoClassScores
from video.transforms.localization_streams import LoadLocalizationStreams
from video.transforms.photometric import ColorJitter
from video.transforms.sampling import SampleFrames
from video.transforms.spatial import Flip, Resize

__all__ = [
    'CenterCrop',
    'ColorJitter',
    'Flip',
    'FormatShape',
    'GenerateLocalizationLabels',
    'LoadLocalizationFeature',
    'LoadLocalizationStreams',
    'LoadVideoClassScores',
    'MultiScaleCrop',
    'PackActionInputs',
    'PackFeatureInputs',
    'PackLocalizationInputs',
    'RandomResizedCrop',
    'Resize',
    'ResizeTemporal',
    'SampleFrames',
    'TenCrop',
    'ThreeCrop',
]
