"""YOLOv3 (Redmon & Farhadi 2018): DarkNet-53 (or any multi-scale backbone) + YOLOv3Neck + YOLOv3Head."""

from __future__ import annotations

from detection.registry import MODELS

from .single_stage import SingleStageDetector


@MODELS.register_module()
class YOLOv3(SingleStageDetector):
    """A single-stage detector; the name selects YOLOv3 in configs (``type: YOLOv3``)."""
