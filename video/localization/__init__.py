"""Temporal action localization utilities shared by the localizers and their evaluation: 1-D IoU / IoA of
segments, Soft-NMS of temporal proposals, and BMN's candidate-proposal generation from boundary scores.

Plain torch on tensors (no model code), so that metrics and post-processing can import it without the models.
"""

from .overlaps import segment_ioa, segment_iou
from .proposals import bmn_proposals, boundary_candidates
from .soft_nms import soft_nms

__all__ = ["bmn_proposals", "boundary_candidates", "segment_ioa", "segment_iou", "soft_nms"]
