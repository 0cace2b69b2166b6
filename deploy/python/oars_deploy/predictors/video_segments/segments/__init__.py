"""Temporal action localisation post-processing in NumPy (torch-free), the one implementation that the training
side's evaluation (``video.localization``, ``BMN.predict``) and the ``video_segments`` predictor both run:

- :mod:`.proposals`: BMN's candidate proposals from the start / end probabilities and the
  boundary-matching confidence map;
- :mod:`.soft_nms`: Gaussian Soft-NMS with BMN's width-adaptive IoU threshold;
- :mod:`.classify`: ActivityNet's detections, proposals x the top-k video-level classes;
- :mod:`.ctcn_decode`: C-TCN's anchor decoding, per-class NMS and Soft-NMS (``CTCN.predict``);
- :mod:`.temporal`: a feature sequence resized to the localiser's temporal scale;
- :mod:`.snippets`: which frames each snippet of a long video takes.
"""

from oars_deploy.predictors.video_segments.segments.classify import combine_classes, top_classes
from oars_deploy.predictors.video_segments.segments.ctcn_decode import ctcn_detections, ctcn_segments, decode_anchors
from oars_deploy.predictors.video_segments.segments.proposals import (
           bmn_proposals,
           boundary_candidates,
           proposals_in_seconds,
)
from oars_deploy.predictors.video_segments.segments.snippets import feature_seconds, num_snippets, snippet_indices
from oars_deploy.predictors.video_segments.segments.soft_nms import soft_nms
from oars_deploy.predictors.video_segments.segments.temporal import resize_positions, resize_temporal

__all__ = ["bmn_proposals", "boundary_candidates", "combine_classes", "ctcn_detections", "ctcn_segments",
           "decode_anchors", "feature_seconds", "num_snippets", "proposals_in_seconds", "resize_positions",
           "resize_temporal", "snippet_indices", "soft_nms", "top_classes"]
