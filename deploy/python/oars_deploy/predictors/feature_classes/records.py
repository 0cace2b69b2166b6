"""The record of the ``feature_classes`` plug-in: one frame-feature file's top-k classes in results.jsonl (the
clip record's JSON)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from oars_deploy.predictors.clip_classes.records import ClipClassesRecord


@dataclass
class FeatureClassesRecord(ClipClassesRecord):
    """A frame-feature file's top-k classes (``predictor: feature_classes``): the clip record's JSON, with
    ``input`` the feature file, ``total_frames`` its frames and ``frame_inds`` the frames kept."""

    predictor: ClassVar[str] = "feature_classes"
