"""Detection pipeline steps, registered in ``detection.registry.TRANSFORMS`` (this package is its location).

The generic transforms (LoadImageFromFile, Resize, RandomFlip, RandomCrop, Pad, Albu...) live in
``oars.data`` and move boxes through the albumentations adapter; they are found through the registry's
parent, and importing them here makes sure they are registered. What albumentations lacks is here.
"""

import oars.data  # noqa: F401  (registers the core transforms)
from detection.box_ops import clip_boxes
from detection.transforms.boxes import box_fields, clip_and_drop, select
from detection.transforms.formatting import PackDetInputs
from detection.transforms.geometric import Expand, MinIoURandomCrop
from detection.transforms.loading import FilterAnnotations, LoadAnnotations
from detection.transforms.mix import MixUp, Mosaic

__all__ = [
    'Expand',
    'FilterAnnotations',
    'LoadAnnotations',
    'MinIoURandomCrop',
    'MixUp',
    'Mosaic',
    'PackDetInputs',
    'box_fields',
    'clip_and_drop',
    'clip_boxes',
    'select',
]
