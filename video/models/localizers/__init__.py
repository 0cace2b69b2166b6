"""Temporal action localizers on feature sequences (registered in ``video.registry.MODELS`` on import): BMN,
its boundary-matching layer, targets and batch preprocessor."""

from .bm_layer import bm_valid_mask, boundary_matching, interp1d_sample_mask
from .bmn import BMN, PROPOSALS_KEY, gt_segments_of
from .data_preprocessor import LocalizationDataPreprocessor
from .targets import bmn_targets, pad_segments

__all__ = [
    "BMN",
    "PROPOSALS_KEY",
    "LocalizationDataPreprocessor",
    "bm_valid_mask",
    "bmn_targets",
    "boundary_matching",
    "gt_segments_of",
    "interp1d_sample_mask",
    "pad_segments",
]
