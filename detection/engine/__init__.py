"""Detection hooks (registered in ``detection.registry.HOOKS`` on import): pictures for ``--show-dir`` and
the HTML report for ``--report`` (also registered under the task-neutral name ``EvaluationReportHook``)."""

from detection.registry import HOOKS

from .prediction_pictures_hook import PredictionPicturesHook
from .report_hook import DetectionReportHook

HOOKS.register_module(name="EvaluationReportHook", module=DetectionReportHook)

__all__ = ["DetectionReportHook", "PredictionPicturesHook"]
