"""Temporal action localization utilities shared by the localizers and their evaluation: 1-D IoU / IoA of
segments (torch, for the training targets), Soft-NMS of temporal proposals and BMN's candidate-proposal
generation from boundary scores.

Soft-NMS and the proposals are tensor adapters over the runtime's NumPy functions (:mod:`oars_deploy.segments`):
one implementation for evaluation and the deployed predictor. No model code here, so that metrics and
post-processing can import it without the models.
"""

from .overlaps import segment_ioa, segment_iou
from .proposals import bmn_proposals, boundary_candidates
from .soft_nms import soft_nms

__all__ = ["bmn_proposals", "boundary_candidates", "segment_ioa", "segment_iou", "soft_nms"]
