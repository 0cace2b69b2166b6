"""Segmentation hooks (registered in ``segmentation.registry.HOOKS`` on import): pictures for ``--show-dir`` and the
HTML report for ``--report`` (also registered under the task-neutral name ``EvaluationReportHook``)."""

from segmentation.registry import HOOKS

from .prediction_pictures_hook import PredictionPicturesHook
from .report_hook import SegmentationReportHook

HOOKS.register_module(name="EvaluationReportHook", module=SegmentationReportHook)

__all__ = ["PredictionPicturesHook", "SegmentationReportHook"]
