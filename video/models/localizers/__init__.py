"""Temporal action localizers on feature sequences (registered in ``video.registry.MODELS`` on import): BMN,
its boundary-matching layer, targets and batch preprocessor; C-TCN, its concept-wise temporal pyramid, anchors,
loss and detection post-processing."""

from .bm_layer import bm_valid_mask, boundary_matching, interp1d_sample_mask
from .bmn import BMN, PROPOSALS_KEY, gt_segments_of
from .ctcn import CTCN, SEGMENTS_KEY
from .ctcn_anchors import CTCNAnchorGenerator, anchor_targets, decode, encode, match_anchors
from .ctcn_backbone import ConceptTCN
from .ctcn_loss import CTCNLoss, hard_negatives
from .ctcn_post import ctcn_detections, gaussian_soft_nms_rows, segment_nms
from .data_preprocessor import LocalizationDataPreprocessor
from .targets import bmn_targets, pad_segments

__all__ = [
    "BMN",
    "CTCN",
    "CTCNAnchorGenerator",
    "CTCNLoss",
    "ConceptTCN",
    "PROPOSALS_KEY",
    "SEGMENTS_KEY",
    "LocalizationDataPreprocessor",
    "bm_valid_mask",
    "anchor_targets",
    "bmn_targets",
    "boundary_matching",
    "ctcn_detections",
    "decode",
    "encode",
    "gaussian_soft_nms_rows",
    "gt_segments_of",
    "hard_negatives",
    "interp1d_sample_mask",
    "match_anchors",
    "pad_segments",
    "segment_nms",
]
